package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// The operations of a namespace as a whole, through the typed client over real stores:
// snapshot, erasure and restore; rollback; the blacklist sweep; the subject-access
// export; proposals; the recovery listing and bulk reads.

// opsClient is an admin of a fresh org on a fresh API process, decoding strictly.
func opsClient(t *testing.T, mod func(*config.Config)) (*client.Client, *testenv.Client, string) {
	t.Helper()
	_, raw, org := env.OrgAPI(t, mod)
	c, err := client.New(raw.URL, raw.Token, client.WithStrictDecoding())
	if err != nil {
		t.Fatal(err)
	}
	return c, raw, org
}

// appendOnly is a fresh namespace that keeps every write as written.
func appendOnly(t *testing.T, c *client.Client, prefix string) string {
	t.Helper()
	ns := testenv.Unique(t, prefix)
	must[*client.NamespaceAnswer](t, "configure")(c.Configure(context.Background(), ns, client.NamespaceConfig{ConflictPolicy: "append_only"}))
	return ns
}

// published waits until the topic holds every revision of the namespace and returns
// them in seq order.
func published(t *testing.T, org, ns string) []*events.Envelope {
	t.Helper()
	gen := testenv.Generation(t, env.PG(t), org, ns)
	testenv.Eventually(t, 30*time.Second, "the records of "+ns+" on the topic", func() bool { return len(env.SeqCopies(t, org, ns)) == int(gen) })
	return testenv.Stream(t, env.TopicRecords(t), org, ns, gen)
}

func must[T any](t *testing.T, what string) func(T, error) T {
	t.Helper()
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

// readAll reads a stream to its end.
func readAll(t *testing.T, st *client.Stream) []byte {
	t.Helper()
	defer st.Close()
	b, err := io.ReadAll(st)
	if err != nil {
		t.Fatalf("read the stream: %v", err)
	}
	return b
}

// snapshotRows reads a snapshot payload's header and memories.
func snapshotRows(t *testing.T, payload []byte) (client.SnapshotHeader, []client.Row, client.End) {
	t.Helper()
	var h client.SnapshotHeader
	var rows []client.Row
	var end client.End
	err := client.ReadLines(bytes.NewReader(payload), func(kind string, line json.RawMessage) error {
		switch kind {
		case "snapshot":
			return json.Unmarshal(line, &h)
		case "memory":
			var m client.SnapshotMemory
			err := json.Unmarshal(line, &m)
			rows = append(rows, m.Row)
			return err
		case "end":
			return json.Unmarshal(line, &end)
		}
		t.Fatalf("unknown line kind %q", kind)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, rows, end
}

// sameHead compares two heads of one memory field by field, leaving out what a
// restore writes anew: the namespace, the version and seq, the commit time and actor,
// and the embedder stamp.
func sameHead(t *testing.T, what string, a, b client.Memory) {
	t.Helper()
	a.Namespace, a.Version, a.VersionText, a.Seq, a.UpdatedAt, a.Actor = "", 0, "", 0, time.Time{}, ""
	b.Namespace, b.Version, b.VersionText, b.Seq, b.UpdatedAt, b.Actor = "", 0, "", 0, time.Time{}, ""
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("%s differs:\n source   %s\n restored %s", what, ja, jb)
	}
}

// headsOf reads the live heads of a namespace by key and user through memory.bulk_get.
func headsOf(t *testing.T, c *client.Client, ns string, keys []client.BulkGetKey) map[string]client.Memory {
	t.Helper()
	a := must[*client.BulkGetAnswer](t, "bulk get")(c.BulkGet(context.Background(), ns, client.BulkGetRequest{Keys: keys}))
	out := map[string]client.Memory{}
	for _, m := range a.Memories {
		out[m.UserID+"/"+m.MemoryKey] = m
	}
	return out
}

func TestSnapshotEraseRestore(t *testing.T) {
	ctx := context.Background()
	c, raw, org := opsClient(t, nil)
	src, dst := appendOnly(t, c, "src"), testenv.Unique(t, "dst")
	alice, bob := client.Identity{UserID: "alice"}, client.Identity{UserID: "bob"}
	write := func(key string, id client.Identity, req client.SetRequest) {
		req.Identity = id
		must[*client.SetAnswer](t, "set "+key)(c.Set(ctx, src, key, req))
	}
	write("tea", alice, client.SetRequest{Value: "alice drinks green tea", Tags: []string{"drink"}})
	write("tea", alice, client.SetRequest{Value: "alice drinks oolong tea"})
	write("city", alice, client.SetRequest{Value: "alice lives in Lisbon"})
	write("tea", bob, client.SetRequest{Value: "bob drinks black tea", Tags: []string{"drink", "morning"}})
	write("editor", bob, client.SetRequest{Value: map[string]any{"name": "vim", "since": 2004}, Confidence: ptr(0.7),
		Entities: []client.Entity{{Name: "vim", Type: "tool"}}})
	write("deleted", bob, client.SetRequest{Value: "bob's deleted note"})
	must[*client.CopyAnswer](t, "verify")(c.Verify(ctx, src, "tea", bob))
	must[*client.CopyAnswer](t, "pin")(c.Pin(ctx, src, "editor", bob))
	must[*client.CopyAnswer](t, "delete")(c.Delete(ctx, src, "deleted", bob, ""))

	payload := readAll(t, must[*client.Stream](t, "snapshot")(c.SnapshotNamespace(ctx, src)))
	h, rows, end := snapshotRows(t, payload)
	if h.Namespace != src || h.Org != org || h.Generation != testenv.Generation(t, env.PG(t), org, src) || end.Rows != 4 || len(rows) != 4 {
		t.Fatalf("snapshot: header %+v, %d rows, end %+v; want the 4 live heads at the namespace's generation", h, len(rows), end)
	}
	if !strings.Contains(string(h.Config), "append_only") {
		t.Errorf("the snapshot does not carry the namespace's config: %s", h.Config)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.read_audit WHERE org = $1 AND id = $2 AND op = 'namespace.snapshot'
		AND rows = 4 AND sha256 = $3 AND completed_at IS NOT NULL`, org, h.SnapshotID, end.SHA256); n != 1 {
		t.Errorf("the snapshot's audit row: %d rows with its count and digest, want 1", n)
	}

	raw.Erasure(t, client.ErasureRequest{UserID: "alice", Namespace: src})

	edited := bytes.Replace(payload, []byte("bob drinks black tea"), []byte("bob drinks red wine!"), 1)
	if _, err := c.RestoreNamespace(ctx, dst, edited); !isCode(err, client.CodeValidationFailed) {
		t.Errorf("restoring an edited snapshot: %v, want 422", err)
	}
	if _, err := c.RestoreNamespace(ctx, dst, payload[:len(payload)-20]); !isCode(err, client.CodeValidationFailed) {
		t.Errorf("restoring a snapshot cut short: %v, want 422", err)
	}
	if g := testenv.Generation(t, env.PG(t), org, dst); g != 0 {
		t.Fatalf("a refused restore wrote %d revisions", g)
	}

	ans := must[*client.RestoreAnswer](t, "restore")(c.RestoreNamespace(ctx, dst, payload))
	if !ans.NamespaceCreated || ans.Replayed || ans.Counts.Rows != 4 || ans.Counts.ErasedSkipped != 2 || ans.Counts.Restored != 2 {
		t.Fatalf("restore: %+v, want bob's 2 memories restored and alice's 2 skipped", ans)
	}
	keys := []client.BulkGetKey{{MemoryKey: "tea", Identity: alice}, {MemoryKey: "city", Identity: alice},
		{MemoryKey: "tea", Identity: bob}, {MemoryKey: "editor", Identity: bob}, {MemoryKey: "deleted", Identity: bob}}
	source, restored := headsOf(t, c, src, keys), headsOf(t, c, dst, keys)
	if len(source) != 2 || len(restored) != 2 {
		t.Fatalf("live heads: source %v, restored %v; want bob's tea and editor in each", mapKeys(source), mapKeys(restored))
	}
	for k, m := range source {
		sameHead(t, k, m, restored[k])
	}
	if r := restored["bob/tea"]; r.VerifiedBy == "" || r.Namespace != dst {
		t.Errorf("the restored row lost verified_by: %+v", r)
	}
	cfg := must[*client.NamespaceAnswer](t, "namespace")(c.Namespace(ctx, dst))
	if cfg.Config.ConflictPolicy != "append_only" {
		t.Errorf("the restore created the namespace with %+v, want the snapshot's config", cfg.Config)
	}

	// Every restored row is a revision on the topic.
	gen := testenv.Generation(t, env.PG(t), org, dst)
	bobRef := testenv.UserRef(t, env.PG(t), org, "bob")
	for _, e := range published(t, org, dst) {
		if e.Revision.Op != "namespace.restore" || e.Type != events.TypeWritten || e.Revision.UserRef != bobRef {
			t.Errorf("record %d: %s %s by %s, want bob's memory.written by namespace.restore", e.Seq, e.Type, e.Revision.Op, e.Revision.UserRef)
		}
	}

	// A retry of the same snapshot writes nothing new.
	again := must[*client.RestoreAnswer](t, "restore again")(c.RestoreNamespace(ctx, dst, payload))
	if !again.Replayed || again.Counts != ans.Counts {
		t.Errorf("the retry answered %+v, want the first restore's counts, replayed", again)
	}
	if g := testenv.Generation(t, env.PG(t), org, dst); g != gen {
		t.Errorf("the retry moved the generation from %d to %d", gen, g)
	}
	// The restored rows are searchable.
	found := must[*client.SearchAnswer](t, "search")(c.Search(ctx, dst, client.SearchRequest{Query: "which tea does bob drink", UserID: "bob"}))
	if len(found.Hits) == 0 || found.Hits[0].MemoryKey != "tea" {
		t.Errorf("search of the restored namespace: %+v", found.Hits)
	}
}

func TestRollbackDryRunListsWhatTheRunChanges(t *testing.T) {
	ctx := context.Background()
	c, _, org := opsClient(t, nil)
	ns := appendOnly(t, c, "rb")
	set := func(key, value string) *client.SetAnswer {
		return must[*client.SetAnswer](t, "set "+key)(c.Set(ctx, ns, key, client.SetRequest{Value: value}))
	}
	set("revised", "the deploy window is Tuesday")
	deleted := set("deleted", "the on-call rota is weekly")
	set("kept", "the office is in Porto")
	set("locked", "the budget is 10k")
	time.Sleep(5 * time.Millisecond)
	asOf := time.Now()
	time.Sleep(5 * time.Millisecond)
	set("revised", "the deploy window is Thursday")
	must[*client.CopyAnswer](t, "delete")(c.Delete(ctx, ns, "deleted", client.Identity{}, ""))
	set("added", "a key written after as_of")
	set("locked", "the budget is 20k")
	must[*client.CopyAnswer](t, "lock")(c.Lock(ctx, ns, "locked", client.Identity{}))

	dry := must[*client.RollbackAnswer](t, "dry run")(c.RollbackNamespace(ctx, ns, client.RollbackRequest{AsOf: asOf}))
	genBefore := testenv.Generation(t, env.PG(t), org, ns)
	if !dry.DryRun || dry.Counts.Reinstated != 2 || dry.Counts.Tombstoned != 1 || dry.Counts.Refused != 1 ||
		len(dry.Refused) != 1 || dry.Refused[0].MemoryKey != "locked" || dry.Refused[0].Code != client.CodeMemoryLocked {
		t.Fatalf("dry run: %+v", dry)
	}
	run := must[*client.RollbackAnswer](t, "rollback")(c.RollbackNamespace(ctx, ns, client.RollbackRequest{AsOf: asOf, DryRun: ptr(false)}))
	if run.DryRun || run.Batches != 1 {
		t.Fatalf("rollback: %+v", run)
	}
	plan := func(cs []client.RollbackChange) []string {
		var out []string
		for _, ch := range cs {
			out = append(out, strings.Join([]string{ch.MemoryKey, ch.Action, ch.Event, versionText(ch.FromVersion), versionText(ch.ReinstatedVersion)}, " "))
		}
		sort.Strings(out)
		return out
	}
	if !slices.Equal(plan(dry.Changes), plan(run.Changes)) {
		t.Fatalf("the dry run listed\n %v\nthe run changed\n %v", plan(dry.Changes), plan(run.Changes))
	}
	if g := testenv.Generation(t, env.PG(t), org, ns); g != genBefore+3 {
		t.Errorf("the rollback wrote %d revisions, want one per listed change (3)", g-genBefore)
	}
	// The run is on record with what it wrote; the dry runs are not.
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.namespace_operations WHERE org = $1 AND namespace = $2
		AND op = 'namespace.rollback' AND batches = 1 AND error IS NULL AND completed_at IS NOT NULL
		AND (counts->>'reinstated')::int = 2 AND (counts->>'tombstoned')::int = 1`, org, ns); n != 1 {
		t.Errorf("%d audit rows of the rollback run, want 1", n)
	}
	value := func(key string) string {
		m, err := c.Get(ctx, ns, key, client.Identity{}, time.Time{})
		if err != nil {
			return "absent"
		}
		return string(m.Value)
	}
	for key, want := range map[string]string{"revised": `"the deploy window is Tuesday"`, "deleted": `"the on-call rota is weekly"`,
		"kept": `"the office is in Porto"`, "added": "absent", "locked": `"the budget is 20k"`} {
		if got := value(key); got != want {
			t.Errorf("%s after the rollback: %s, want %s", key, got, want)
		}
	}
	if m := must[*client.Memory](t, "get")(c.Get(ctx, ns, "deleted", client.Identity{}, time.Time{})); m.MemoryID != deleted.MemoryID {
		t.Errorf("the reinstated memory has id %s, want its own %s", m.MemoryID, deleted.MemoryID)
	}
	// Run again, it has nothing left to change but what the lock refuses.
	after := must[*client.RollbackAnswer](t, "dry run again")(c.RollbackNamespace(ctx, ns, client.RollbackRequest{AsOf: asOf}))
	if len(after.Changes) != 0 || after.Counts.Refused != 1 {
		t.Errorf("a dry run after the rollback: %+v", after)
	}
}

func TestBlacklistSweepRemovesMatchesFromSearch(t *testing.T) {
	ctx := context.Background()
	c, _, org := opsClient(t, nil)
	ns := appendOnly(t, c, "sweep")
	leaked := map[string]bool{}
	for i, v := range []string{"the deploy key is sk-live-4f9a2c", "staging uses sk-live-77b1e0 for payments", "the deploy runs on Fridays"} {
		key := "note-" + string(rune('a'+i))
		a := must[*client.SetAnswer](t, "set")(c.Set(ctx, ns, key, client.SetRequest{Value: v, Identity: client.Identity{UserID: "ops"}}))
		if strings.Contains(v, "sk-live") {
			leaked[a.MemoryID] = true
		}
	}
	hits := func() []string {
		a := must[*client.SearchAnswer](t, "search")(c.Search(ctx, ns, client.SearchRequest{Query: "deploy key sk-live", UserID: "ops"}))
		var ids []string
		for _, h := range a.Hits {
			ids = append(ids, h.MemoryID)
		}
		return ids
	}
	if got := hits(); !slices.ContainsFunc(got, func(id string) bool { return leaked[id] }) {
		t.Fatalf("search finds no leaked row before the sweep: %v", got)
	}
	added := must[*client.NamespaceAnswer](t, "blacklist add")(c.AddBlacklistPattern(ctx, ns, `sk-live-[0-9a-f]{6}`))
	if added.SweepError != "" || added.Sweep == nil || added.Sweep.Matched != 2 || added.Sweep.Tombstoned != 2 {
		t.Fatalf("blacklist add: %+v sweep %+v", added, added.Sweep)
	}
	if got := hits(); slices.ContainsFunc(got, func(id string) bool { return leaked[id] }) {
		t.Errorf("search still serves a leaked row after the sweep: %v", got)
	}
	if list := must[*client.ListAnswer](t, "list")(c.List(ctx, ns, client.ListOptions{})); len(list.Memories) != 1 {
		t.Errorf("list after the sweep holds %d rows, want the 1 clean one", len(list.Memories))
	}
	// The tombstones are on the topic, each naming a leaked memory.
	swept := map[string]bool{}
	for _, e := range published(t, org, ns) {
		if e.Revision != nil && e.Revision.Op == "blacklist.sweep" {
			if e.Type != events.TypeTombstoned || !e.Revision.Tombstone {
				t.Errorf("a sweep record is %s (tombstone %v)", e.Type, e.Revision.Tombstone)
			}
			swept[e.Revision.MemoryID] = true
		}
	}
	if len(swept) != 2 || !swept[firstKey(leaked)] {
		t.Errorf("the topic's sweep tombstones name %v, want the leaked %v", swept, leaked)
	}
	again := must[*client.SweepReport](t, "sweep")(c.SweepBlacklist(ctx, ns, ""))
	if again.Matched != 0 || len(again.Patterns) != 1 {
		t.Errorf("a second sweep: %+v, want nothing left to match", again)
	}
	if _, err := c.SweepBlacklist(ctx, ns, "not-listed"); !isCode(err, client.CodeNotFound) {
		t.Errorf("sweeping a pattern the blacklist does not hold: %v, want 404", err)
	}
}

// A sweep cut short after a batch landed answers what landed with its error in
// sweep_error, keeps the pattern and records the error on it; the next sweep takes the
// rest and clears it.
func TestBlacklistSweepStoppedShort(t *testing.T) {
	ctx := context.Background()
	var commits atomic.Int32
	_, raw, _ := env.OrgAPI(t, func(c *config.Config) { c.Command.RestoreBatchRows = 2 },
		app.WithCommandFaults(command.Faults{AfterCommit: func() error {
			if commits.Add(-1) == 0 {
				return errors.New("connection cut after COMMIT")
			}
			return nil
		}}))
	c := raw.Typed(t)
	ns := appendOnly(t, c, "sweep-short")
	for _, key := range []string{"a", "b", "c"} {
		must[*client.SetAnswer](t, "set")(c.Set(ctx, ns, key, client.SetRequest{Value: "token sk-live-" + key + "00000"}))
	}
	commits.Store(2) // the sweep's second batch loses its answer
	const pattern = `sk-live-[0-9a-f]{6}`
	added := must[*client.NamespaceAnswer](t, "blacklist add")(c.AddBlacklistPattern(ctx, ns, pattern))
	if added.SweepError == "" || added.Sweep == nil || added.Sweep.Tombstoned != 2 || !slices.Contains(added.Blacklist, pattern) {
		t.Fatalf("a sweep cut short: %+v sweep %+v, want 2 tombstoned, sweep_error set and the pattern kept", added, added.Sweep)
	}
	recorded := func() string {
		var e *string
		if err := env.PG(t).QueryRow(ctx, `SELECT sweep_error FROM loom.blacklist WHERE namespace = $1 AND pattern = $2`, ns, pattern).Scan(&e); err != nil {
			t.Fatal(err)
		}
		if e == nil {
			return ""
		}
		return *e
	}
	if got := recorded(); got != added.SweepError {
		t.Errorf("the pattern's recorded sweep_error is %q, want the answer's %q", got, added.SweepError)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.namespace_operations WHERE namespace = $1 AND op = 'blacklist.sweep'
		AND error = $2 AND batches = 1 AND (counts->>'tombstoned')::int = 2`, ns, added.SweepError); n != 1 {
		t.Errorf("%d audit rows of the sweep cut short, want 1 with its error and the batch that landed", n)
	}
	// The lost answer's batch landed: nothing is left to match, and the error clears.
	again := must[*client.SweepReport](t, "sweep")(c.SweepBlacklist(ctx, ns, pattern))
	if again.Matched != 0 || again.Error != "" || recorded() != "" {
		t.Errorf("the next sweep: %+v, recorded error %q; want nothing left and no error", again, recorded())
	}
}

func TestSubjectAccessExport(t *testing.T) {
	ctx := context.Background()
	c, raw, org := opsClient(t, nil)
	ns1, ns2 := appendOnly(t, c, "ex1"), appendOnly(t, c, "ex2")
	alice, bob := client.Identity{UserID: "alice"}, client.Identity{UserID: "bob"}
	// The columns hold an agent's and a session's references (migration 173): the
	// export answers the clear ones, from the rows.
	aliceTravelling := client.Identity{UserID: "alice", Agent: "courier", SessionID: "trip-1"}
	wrote := map[string][]string{} // alice's values by namespace/key, in order
	set := func(ns, key, value string, id client.Identity) {
		must[*client.SetAnswer](t, "set")(c.Set(ctx, ns, key, client.SetRequest{Value: value, Identity: id}))
		if id.UserID == alice.UserID {
			wrote[ns+"/"+key] = append(wrote[ns+"/"+key], `"`+value+`"`)
		}
	}
	set(ns1, "tea", "alice drinks green tea", alice)
	set(ns1, "tea", "bob drinks black tea", bob)
	set(ns1, "tea", "alice drinks oolong tea", alice)
	set(ns2, "city", "alice lives in Lisbon", aliceTravelling)
	set(ns2, "city", "bob lives in Oslo", bob)
	must[*client.CopyAnswer](t, "delete")(c.Delete(ctx, ns2, "city", aliceTravelling, ""))

	reader := raw.Typed(t).WithToken(env.Token(t, env.Open(t, nil), auth.NewToken{Org: org, Role: auth.RoleWriter}))
	if _, err := reader.Export(ctx, "alice"); !isCode(err, client.CodePermissionDenied) {
		t.Errorf("an export by a writer token: %v, want 403", err)
	}
	st := must[*client.Stream](t, "export")(c.Export(ctx, "alice"))
	payload := readAll(t, st)
	got := map[string][]string{}
	var h client.ExportHeader
	var end client.End
	err := client.ReadLines(bytes.NewReader(payload), func(kind string, line json.RawMessage) error {
		switch kind {
		case "export":
			return json.Unmarshal(line, &h)
		case "end":
			return json.Unmarshal(line, &end)
		}
		var m client.ExportMemory
		if err := json.Unmarshal(line, &m); err != nil {
			return err
		}
		for _, v := range m.Versions {
			if m.UserID != "alice" || v.Row.UserID != "alice" {
				t.Errorf("the export holds a row of user %s/%s", m.UserID, v.Row.UserID)
			}
			if v.Row.Tombstone {
				continue
			}
			got[m.Namespace+"/"+m.MemoryKey] = append(got[m.Namespace+"/"+m.MemoryKey], string(v.Row.Value))
		}
		if last := m.Versions[len(m.Versions)-1]; m.MemoryKey == "city" && (!last.Row.Tombstone || last.Event != "memory.tombstoned") {
			t.Errorf("the deleted memory's last version is %+v, want its tombstone", last)
		}
		agent, session := "-", "-"
		if m.MemoryKey == "city" {
			agent, session = aliceTravelling.Agent, aliceTravelling.SessionID
		}
		if m.Agent != agent || m.SessionID != session {
			t.Errorf("the export names %s's agent %q and session %q, want %q and %q", m.MemoryKey, m.Agent, m.SessionID, agent, session)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if h.UserID != "alice" || h.ExportID != st.ID || end.Rows != 2 {
		t.Fatalf("export header %+v, end %+v", h, end)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(wrote)
	if !bytes.Equal(gj, wj) {
		t.Errorf("the export holds\n %s\nalice wrote\n %s", gj, wj)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.read_audit WHERE org = $1 AND id = $2 AND op = 'erasure.export'
		AND user_id = loom.user_ref(org, 'alice') AND rows = 2 AND sha256 = $3`, org, h.ExportID, end.SHA256); n != 1 {
		t.Errorf("the export's audit row: %d, want 1", n)
	}
}

func TestProposalsRecoveryListingAndBulkGet(t *testing.T) {
	ctx := context.Background()
	c, _, org := opsClient(t, nil)
	ns := appendOnly(t, c, "prop")
	agent := client.Identity{Agent: "scout"}
	p1 := must[*client.SetAnswer](t, "propose")(c.Set(ctx, ns, "standup", client.SetRequest{Value: "standup moves to 9:30", Identity: agent, Proposed: true}))
	must[*client.SetAnswer](t, "propose")(c.Set(ctx, ns, "lunch", client.SetRequest{Value: "lunch is at noon", Identity: agent, Proposed: true}))
	if p1.Status != "proposed" {
		t.Fatalf("a proposal is %s", p1.Status)
	}
	acc := must[*client.SetAnswer](t, "accept")(c.AcceptProposal(ctx, ns, "standup", agent))
	if !acc.Written || acc.Status != "active" || acc.MemoryID != p1.MemoryID {
		t.Fatalf("accept: %+v", acc)
	}
	acceptedAt := time.Now()
	rej := must[*client.CopyAnswer](t, "reject")(c.RejectProposal(ctx, ns, "lunch", agent))
	if !rej.Written || rej.Status != "rejected" {
		t.Fatalf("reject: %+v", rej)
	}
	if _, err := c.AcceptProposal(ctx, ns, "standup", agent); !isCode(err, client.CodePreconditionFailed) {
		t.Errorf("accepting a fact: %v, want 409 PRECONDITION_FAILED", err)
	}
	// The proposal's writer (agent scout) is told on the topic, by reference (envelope
	// version 3).
	var scout string
	if err := env.PG(t).QueryRow(ctx, `SELECT loom.agent_ref($1, 'scout')`, org).Scan(&scout); err != nil {
		t.Fatal(err)
	}
	var decided []string
	for _, e := range published(t, org, ns) {
		if e.Revision.Op == "memory.proposal_decide" && e.Revision.AgentRef == scout {
			decided = append(decided, e.Revision.Status)
		}
	}
	if !slices.Equal(decided, []string{"active", "rejected"}) {
		t.Errorf("the topic tells the writer %v, want [active rejected]", decided)
	}

	// A recovery listing lists the deleted memory; bulk_get reads by key and by id.
	must[*client.CopyAnswer](t, "delete")(c.Delete(ctx, ns, "standup", agent, ""))
	live := must[*client.ListAnswer](t, "list")(c.List(ctx, ns, client.ListOptions{Status: []string{"active", "rejected"}}))
	all := must[*client.ListAnswer](t, "list")(c.List(ctx, ns, client.ListOptions{Status: []string{"active", "rejected"}, IncludeTombstoned: true}))
	if len(live.Memories) != 1 || len(all.Memories) != 2 || !slices.ContainsFunc(all.Memories, func(m client.Memory) bool { return m.Tombstone && m.MemoryKey == "standup" }) {
		t.Errorf("list: %d live, %d with the deleted ones (%+v); want 1 and 2", len(live.Memories), len(all.Memories), all.Memories)
	}
	if _, err := c.List(ctx, ns, client.ListOptions{IncludeTombstoned: true, AsOf: time.Now()}); !isCode(err, client.CodeValidationFailed) {
		t.Errorf("a recovery listing as of a time: %v, want 422", err)
	}
	then := must[*client.ListAnswer](t, "list as of")(c.List(ctx, ns, client.ListOptions{Status: []string{"active"}, AsOf: acceptedAt}))
	if len(then.Memories) != 1 || then.Memories[0].MemoryKey != "standup" {
		t.Errorf("list as of the accept: %+v, want the accepted standup", then.Memories)
	}
	got := must[*client.BulkGetAnswer](t, "bulk get")(c.BulkGet(ctx, ns, client.BulkGetRequest{
		Keys: []client.BulkGetKey{{MemoryKey: "lunch", Identity: agent}, {MemoryKey: "standup", Identity: agent}, {MemoryKey: "nothing"}},
		IDs:  []string{p1.MemoryID, rej.MemoryID}}))
	if len(got.Memories) != 1 || got.Memories[0].MemoryKey != "lunch" || len(got.Missing.Keys) != 2 || !slices.Equal(got.Missing.IDs, []string{p1.MemoryID}) {
		t.Errorf("bulk get: %+v", got)
	}
	if _, err := c.BulkGet(ctx, ns, client.BulkGetRequest{}); !isCode(err, client.CodeValidationFailed) {
		t.Errorf("an empty bulk get: %v, want 422", err)
	}
}

func isCode(err error, code client.Code) bool {
	e, ok := client.AsError(err)
	return ok && e.Code == code
}

func ptr[T any](v T) *T { return &v }

func versionText(v int64) string { return strconv.FormatInt(v, 10) }

func mapKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func firstKey(m map[string]bool) string {
	return mapKeys(m)[0]
}
