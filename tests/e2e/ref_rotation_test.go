package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/atrest"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/tests/testenv"
)

// rotationWait stands for atrest.RetiredKeyWait in the tests: the API process's
// reads of the key's generation succeed, so its copy follows the swap within a second.
const rotationWait = 3 * time.Second

// rotationWriter is one user's writes: two versions of one key, another key, and a
// turn, all under the user's own agent and session.
type rotationWriter struct {
	user, agent, session string
}

func (w rotationWriter) identity() client.Identity {
	return client.Identity{Agent: w.agent, UserID: w.user, SessionID: w.session}
}

func (w rotationWriter) write(t *testing.T, tc *client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	for _, v := range []struct{ key, value string }{
		{"drink", w.user + " drinks black coffee"}, {"drink", w.user + " drinks green tea"}, {"city", w.user + " lives in Lisbon"},
	} {
		if _, err := tc.Set(ctx, ns, v.key, client.SetRequest{Value: v.value, Identity: w.identity()}); err != nil {
			t.Fatalf("set %s as %s: %v", v.key, w.user, err)
		}
	}
	if _, err := tc.Observe(ctx, ns, client.ObserveRequest{Identity: w.identity(), Turns: []client.ObservedTurn{
		{Role: "user", Content: "My greyhound " + w.user + "dog loves the beach at Cascais."},
		{Role: "assistant", Content: "Greyhounds love to run."},
	}}); err != nil {
		t.Fatalf("observe as %s: %v", w.user, err)
	}
}

// oldRefs are w's references under org's current key: its user, agent, session and
// memory keys.
func (w rotationWriter) refs(t *testing.T, pool *pgxpool.Pool, org string) []string {
	t.Helper()
	var key []byte
	if err := pool.QueryRow(context.Background(), `SELECT loom.unwrapped_key(key) FROM loom.user_ref_keys WHERE org = $1`, org).Scan(&key); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range []func() (string, error){
		func() (string, error) { return events.UserRef(key, w.user) },
		func() (string, error) { return events.AgentRef(key, w.agent) },
		func() (string, error) { return events.SessionRef(key, w.session) },
		func() (string, error) { return events.KeyRef(key, "drink") },
		func() (string, error) { return events.KeyRef(key, "city") },
	} {
		ref, err := f()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ref)
	}
	return out
}

// readsOf is what w reads through the API, as text to compare: memory.get of each key,
// memory.list, memory.search, memory.history, memory.recall, and a token bound to the
// user (its own description and a search as it).
func readsOf(t *testing.T, tc *client.Client, bound *testenv.Client, ns string, w rotationWriter) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, key := range []string{"city", "drink"} {
		m, err := tc.Get(ctx, ns, key, w.identity(), time.Time{})
		if err != nil {
			t.Fatalf("get %s of %s: %v", key, w.user, err)
		}
		fmt.Fprintf(&b, "get %s: %s %s %s %s v%d\n", key, m.Value, m.Agent, m.UserID, m.SessionID, m.Version)
		h, err := tc.History(ctx, ns, key, w.identity())
		if err != nil {
			t.Fatalf("history of %s of %s: %v", key, w.user, err)
		}
		for _, v := range h.Versions {
			fmt.Fprintf(&b, "history %s: v%d %s\n", key, v.Version, v.Event)
		}
	}
	list, err := tc.List(ctx, ns, client.ListOptions{Order: "key", Identity: client.Identity{UserID: w.user}})
	if err != nil {
		t.Fatalf("list of %s: %v", w.user, err)
	}
	for _, m := range list.Memories {
		fmt.Fprintf(&b, "list: %s %s\n", m.MemoryKey, m.Value)
	}
	search, err := tc.Search(ctx, ns, client.SearchRequest{Query: "what does " + w.user + " drink", UserID: w.user, TopK: 10})
	if err != nil {
		t.Fatalf("search of %s: %v", w.user, err)
	}
	var keys []string
	for _, h := range search.Hits {
		keys = append(keys, h.MemoryKey+" "+string(h.Value))
	}
	slices.Sort(keys)
	fmt.Fprintf(&b, "search: %v\n", keys)
	recall, err := tc.Recall(ctx, ns, client.RecallRequest{Query: "what is the greyhound called", Identity: client.Identity{UserID: w.user}})
	if err != nil {
		t.Fatalf("recall of %s: %v", w.user, err)
	}
	for _, h := range recall.Hits {
		fmt.Fprintf(&b, "recall: %s %s %s\n", h.Text, h.UserID, h.SessionID)
	}
	self := bound.Do(t, http.MethodGet, "/v1/token", nil)
	if self.Status != http.StatusOK {
		t.Fatalf("the bound token's description: %d %s", self.Status, self.Body)
	}
	fmt.Fprintf(&b, "token: %v\n", self.JSON(t)["read_user_id"])
	as, err := bound.Typed(t).Search(ctx, ns, client.SearchRequest{Query: "green tea", TopK: 10})
	if err != nil {
		t.Fatalf("search as the bound token: %v", err)
	}
	for _, h := range as.Hits {
		fmt.Fprintf(&b, "bound search: %s %s\n", h.MemoryKey, h.UserID)
	}
	return b.String()
}

// columnsHolding names each text, array and JSON column of Postgres's loom schema
// holding one of refs, with its count of rows.
func columnsHolding(t *testing.T, pool *pgxpool.Pool, refs []string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT table_name, column_name FROM information_schema.columns c
		WHERE table_schema = 'loom' AND data_type IN ('text', 'ARRAY', 'jsonb', 'json')
		  AND EXISTS (SELECT 1 FROM information_schema.tables x WHERE x.table_schema = 'loom' AND x.table_name = c.table_name
			AND x.table_type = 'BASE TABLE')`)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var c [2]string
		return c, r.Scan(&c[0], &c[1])
	})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]int64{}
	pattern := strings.Join(refs, "|")
	for _, c := range cols {
		var n int64
		q := fmt.Sprintf(`SELECT count(*) FROM loom.%q WHERE %q::text ~ $1`, c[0], c[1])
		if err := pool.QueryRow(ctx, q, pattern).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n > 0 {
			found[c[0]+"."+c[1]] = n
		}
	}
	return found
}

// rotateWith runs a rotation of org's key as `loomd refs rotate` runs it, republish
// included.
func rotateWith(t *testing.T, n *app.Process, org string, opts atrest.RefRotationOptions) atrest.RefRotation {
	t.Helper()
	if opts.Wait == 0 {
		opts.Wait = rotationWait
	}
	opts.Republish = func(ctx context.Context, org string) error {
		_, err := n.Command.Republish(ctx, command.RepublishOptions{Org: org, FromSeq: 1, Topic: n.Cfg.Pipeline.Topic})
		return err
	}
	r, err := atrest.RotateRefKey(context.Background(), n.PG, n.Keys, org, opts)
	if err != nil {
		t.Fatalf("rotate the user reference key of %s: %v", org, err)
	}
	return r
}

// A rotation of an org's user reference key after one of its users is erased: every
// survivor's data reads as before through the API (get, history, list, search,
// recall, a token bound to the user), the org holds only the new key (no retired one
// a live KEK opens), and no column of Postgres holds a reference under the old key,
// the survivor's or the erased user's. On the branch before the rotation there was
// no way to replace the key: every reference ever made stayed under it.
func TestRotateRefKeyRewritesEveryReferenceAndDropsTheOldKey(t *testing.T) {
	n, c, org := env.OrgAPI(t, nil)
	pool := env.PG(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "rotate")
	ann := rotationWriter{user: "ann", agent: "agent-ann", session: "sess-ann"}
	bea := rotationWriter{user: "bea", agent: "agent-bea", session: "sess-bea"}
	ann.write(t, tc, ns)
	bea.write(t, tc, ns)
	bound := testenv.NewClient(c.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: "ann"}))
	oldRefs := append(ann.refs(t, pool, org), bea.refs(t, pool, org)...)
	var oldKey []byte
	if err := pool.QueryRow(context.Background(), `SELECT key FROM loom.user_ref_keys WHERE org = $1`, org).Scan(&oldKey); err != nil {
		t.Fatal(err)
	}
	c.Erase(t, map[string]any{"user_id": "bea"})
	var before string
	testenv.Eventually(t, 30*time.Second, "ann's reads to settle (the index and the turns)", func() bool {
		before = readsOf(t, tc, bound, ns, ann)
		return strings.Contains(before, "search: [") && strings.Contains(before, "green tea") && strings.Contains(before, "recall: ")
	})
	if found := columnsHolding(t, pool, oldRefs); len(found) == 0 {
		t.Fatal("before the rotation no column holds the old references: the scan finds nothing")
	}

	r := rotateWith(t, n, org, atrest.RefRotationOptions{})
	t.Logf("rotation: %+v", r)

	testenv.Eventually(t, 30*time.Second, "ann's reads to answer as before the rotation", func() bool {
		return readsOf(t, tc, bound, ns, ann) == before
	})
	if after := readsOf(t, tc, bound, ns, ann); after != before {
		t.Errorf("ann's reads changed with the rotation:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	var gen int
	var retired, retiredGen any
	var key []byte
	if err := pool.QueryRow(context.Background(), `SELECT gen, key, retired, retired_gen FROM loom.user_ref_keys WHERE org = $1`, org).
		Scan(&gen, &key, &retired, &retiredGen); err != nil {
		t.Fatal(err)
	}
	if gen != 2 || retired != nil || retiredGen != nil || string(key) == string(oldKey) {
		t.Errorf("after the rotation the org's key is generation %d, retired %v (gen %v), the old key kept: %v", gen, retired, retiredGen,
			string(key) == string(oldKey))
	}
	if found := columnsHolding(t, pool, oldRefs); len(found) > 0 {
		t.Errorf("after the rotation these columns hold references under the old key: %v", found)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.ref_rotation_map WHERE org = $1`, org); n != 0 {
		t.Errorf("the rotation's mapping keeps %d rows", n)
	}
	// A write after the rotation finds the head the rotation rewrote: one head per key.
	if _, err := tc.Set(context.Background(), ns, "drink", client.SetRequest{Value: "ann drinks water", Identity: ann.identity()}); err != nil {
		t.Fatal(err)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_current WHERE org = $1 AND namespace = $2`, org, ns); n != 2 {
		t.Errorf("after a write following the rotation the namespace holds %d heads, want 2", n)
	}
}

// A rotation stopped after its swap (the process died while waiting) is finished by
// the next run: the key it swapped in stays (no second swap), the rows written under
// either key read as one user's, and the retired key is dropped.
func TestRotateRefKeyResumesARotationStoppedAfterTheSwap(t *testing.T) {
	n, c, org := env.OrgAPI(t, nil)
	pool := env.PG(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "rotate")
	ann := rotationWriter{user: "ann", agent: "agent-ann", session: "sess-ann"}
	ann.write(t, tc, ns)
	oldRefs := ann.refs(t, pool, org)
	first := rotateWith(t, n, org, atrest.RefRotationOptions{StopAfterSwap: true})
	if first.Gen != 2 || first.Resumed {
		t.Fatalf("the first run: %+v", first)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.user_ref_keys WHERE org = $1 AND retired IS NOT NULL`, org); n != 1 {
		t.Fatal("the first run left no retired key")
	}
	time.Sleep(rotationWait)
	// A write between the runs is named under the new key.
	if _, err := tc.Set(context.Background(), ns, "food", client.SetRequest{Value: "ann eats soup", Identity: ann.identity()}); err != nil {
		t.Fatal(err)
	}
	second := rotateWith(t, n, org, atrest.RefRotationOptions{})
	if second.Gen != 2 || !second.Resumed {
		t.Errorf("the second run: %+v, want generation 2, resumed", second)
	}
	if found := columnsHolding(t, pool, oldRefs); len(found) > 0 {
		t.Errorf("after the resumed rotation these columns hold references under the old key: %v", found)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.user_ref_keys WHERE org = $1 AND retired IS NULL AND gen = 2`, org); n != 1 {
		t.Error("after the resumed rotation the org's key is not generation 2 with no retired key")
	}
	list, err := tc.List(context.Background(), ns, client.ListOptions{Order: "key", Identity: client.Identity{UserID: "ann"}})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range list.Memories {
		keys = append(keys, m.MemoryKey)
	}
	if strings.Join(keys, ",") != "city,drink,food" {
		t.Errorf("ann's list after the resumed rotation: %v", keys)
	}
	r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/drink?user_id=ann&agent=agent-ann&session_id=sess-ann", nil)
	if r.Status != http.StatusOK {
		t.Errorf("get of a key written before the rotation: %d %s", r.Status, r.Body)
	}
	var v map[string]any
	_ = json.Unmarshal(r.Body, &v)
	if v["value"] != "ann drinks green tea" {
		t.Errorf("get of drink: %v", v["value"])
	}
}

// A KEK rotation replaces an org's user reference key wrapped under the old KEK rather
// than wrapping it again (the at-rest pass at a command process's start runs
// atrest.RotateRefKeys): the org's key is a fresh one under the new KEK, no column
// holds a reference under the old key, and the user's data reads as before. The org's
// key is put under a KEK of this test's own (the suite's is the ring's first), so the
// pass finds this org's key alone under an old KEK.
func TestAKEKRotationReplacesTheRefKeyUnderTheOldKEK(t *testing.T) {
	other, err := kek.Generate()
	if err != nil {
		t.Fatal(err)
	}
	both := env.Config(nil).Keys.KEK + "," + other
	n, c, org := env.OrgAPI(t, func(cfg *config.Config) { cfg.Keys.KEK = both })
	tc := c.Typed(t)
	ns := testenv.Unique(t, "rotate")
	ann := rotationWriter{user: "ann", agent: "agent-ann", session: "sess-ann"}
	ann.write(t, tc, ns)
	ring := mustRing(t, both)
	pool := poolWithKEK(t, ring)
	oldRefs := ann.refs(t, pool, org)
	ctx := context.Background()
	var plain []byte
	if err := pool.QueryRow(ctx, `SELECT loom.unwrapped_key(key) FROM loom.user_ref_keys WHERE org = $1`, org).Scan(&plain); err != nil {
		t.Fatal(err)
	}
	underOther, err := mustRing(t, other).Wrap(plain)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, pool, `UPDATE loom.user_ref_keys SET key = $2 WHERE org = $1`, org, underOther)
	bound := testenv.NewClient(c.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: "ann"}))
	var before string
	testenv.Eventually(t, 30*time.Second, "ann's reads to settle (the index and the turns)", func() bool {
		before = readsOf(t, tc, bound, ns, ann)
		return strings.Contains(before, "green tea") && strings.Contains(before, "recall: ")
	})

	rs, err := atrest.RotateRefKeys(ctx, pool, ring, atrest.RefRotationOptions{Wait: rotationWait})
	if err != nil {
		t.Fatal(err)
	}
	var rotated []string
	for _, r := range rs {
		rotated = append(rotated, r.Org)
	}
	if !slices.Contains(rotated, org) {
		t.Fatalf("the pass rotated %v, not %s", rotated, org)
	}
	var stored, opened []byte
	if err := pool.QueryRow(ctx, `SELECT key, loom.unwrapped_key(key) FROM loom.user_ref_keys WHERE org = $1 AND retired IS NULL`, org).
		Scan(&stored, &opened); err != nil {
		t.Fatal(err)
	}
	if !ring.Current(stored) || string(opened) == string(plain) {
		t.Errorf("after the pass the org's key is under the ring's first KEK: %t; the old key kept: %t", ring.Current(stored), string(opened) == string(plain))
	}
	if found := columnsHolding(t, pool, oldRefs); len(found) > 0 {
		t.Errorf("after the pass these columns hold references under the old key: %v", found)
	}
	testenv.Eventually(t, 30*time.Second, "ann's reads to answer as before the rotation", func() bool {
		return readsOf(t, tc, bound, ns, ann) == before
	})
}

// throughRotation is a rotation of a fresh org's key while one user writes three keys
// again and again: the last value and the count of writes of each key.
type throughRotation struct {
	tc          *client.Client
	pool        *pgxpool.Pool
	org, ns     string
	ann         rotationWriter
	oldRefs     []string
	last        map[string]string
	writes      map[string]int
	keysWritten []string
}

func writeThroughRotation(t *testing.T) throughRotation {
	t.Helper()
	n, c, org := env.OrgAPI(t, nil)
	w := throughRotation{tc: c.Typed(t), pool: env.PG(t), org: org, ns: testenv.Unique(t, "rotate"),
		ann: rotationWriter{user: "ann", agent: "agent-ann", session: "sess-ann"}, last: map[string]string{}, writes: map[string]int{},
		keysWritten: []string{"k0", "k1", "k2"}}
	w.ann.write(t, w.tc, w.ns)
	w.oldRefs = w.ann.refs(t, w.pool, org)
	done := make(chan struct{})
	stopped := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				stopped <- nil
				return
			default:
			}
			key := w.keysWritten[i%len(w.keysWritten)]
			value := fmt.Sprintf("%s written %d", key, i)
			if _, err := w.tc.Set(context.Background(), w.ns, key, client.SetRequest{Value: value, Identity: w.ann.identity()}); err != nil {
				stopped <- err
				return
			}
			w.last[key] = value
			w.writes[key]++
			time.Sleep(20 * time.Millisecond)
		}
	}()
	rotateWith(t, n, org, atrest.RefRotationOptions{})
	close(done)
	if err := <-stopped; err != nil {
		t.Fatalf("a write during the rotation: %v", err)
	}
	return w
}

// Writes that go on through a rotation (each key written again and again as one user)
// leave one head per key, reading the last value written, and no reference under the
// old key: what a commit named under the retired key before the swap reached it is
// rewritten, and a head a commit made under the new key meanwhile replaces the one
// under the old key.
func TestRotateRefKeyUnderWritesLeavesOneHeadPerKey(t *testing.T) {
	w := writeThroughRotation(t)
	if found := columnsHolding(t, w.pool, w.oldRefs); len(found) > 0 {
		t.Errorf("after the rotation these columns hold references under the old key: %v", found)
	}
	if got := testenv.Int(t, w.pool, `SELECT count(*) FROM loom.memory_current WHERE org = $1 AND namespace = $2`, w.org, w.ns); got != 5 {
		t.Errorf("after the rotation the namespace holds %d heads, want 5 (one a key)", got)
	}
	for _, key := range w.keysWritten {
		m, err := w.tc.Get(context.Background(), w.ns, key, w.ann.identity(), time.Time{})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		var v string
		_ = json.Unmarshal(m.Value, &v)
		if v != w.last[key] {
			t.Errorf("get %s after the rotation reads %q, want the last written %q", key, v, w.last[key])
		}
	}
}

// And each key stays one memory through the rotation: its history holds every write
// under one memory id. This needs the set path to find a head named under the retired
// key and revise it (command/set_retired_heads.go, step (a) of docs/architecture.md):
// without it the first write after the swap made a second memory of the key, and the
// rewrite then dropped the first one's head ("43 versions of 2 memories").
func TestRotateRefKeyUnderWritesKeepsEachKeyOneMemory(t *testing.T) {
	w := writeThroughRotation(t)
	for _, key := range w.keysWritten {
		h, err := w.tc.History(context.Background(), w.ns, key, w.ann.identity())
		if err != nil {
			t.Fatalf("history of %s: %v", key, err)
		}
		ids := map[string]bool{}
		for _, v := range h.Versions {
			ids[v.MemoryID] = true
		}
		if len(h.Versions) != w.writes[key] || len(ids) != 1 {
			t.Errorf("%s was written %d times; its history holds %d versions of %d memories", key, w.writes[key], len(h.Versions), len(ids))
		}
	}
}

// `loomd refs rotate --org ORG`, run as an operator runs it: it rotates the org's key
// (waiting the swap out, republishing the org's records), says what it rewrote and
// that the old KEK may go, and the org's data reads as before; the usage without
// --org is a usage error.
func TestLoomdRefsRotateReplacesTheOrgsKey(t *testing.T) {
	_, c, org := env.OrgAPI(t, nil)
	pool := env.PG(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "rotatecmd")
	ann := rotationWriter{user: "ann", agent: "agent-ann", session: "sess-ann"}
	ann.write(t, tc, ns)
	oldRefs := ann.refs(t, pool, org)
	bin := testenv.Build(t, "github.com/loomplane/loom/cmd/loomd")
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"refs", "rotate"}, args...)...)
		cmd.Env = env.LoomdEnv("LOOM_LOG_LEVEL=warn")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("run loomd refs rotate: %v", err)
		}
		if exit != nil {
			return string(out), exit.ExitCode()
		}
		return string(out), 0
	}
	if _, code := run(); code != 2 {
		t.Errorf("loomd refs rotate without --org exits %d, want 2", code)
	}
	out, code := run("--org", org)
	if code != 0 || !strings.Contains(out, "is now generation 2") || !strings.Contains(out, "the old key may be destroyed") ||
		!strings.Contains(out, "loom.memory_current: 2 rows rewritten") {
		t.Fatalf("loomd refs rotate --org: exit %d\n%s", code, out)
	}
	if found := columnsHolding(t, pool, oldRefs); len(found) > 0 {
		t.Errorf("after loomd refs rotate these columns hold references under the old key: %v", found)
	}
	m, err := tc.Get(context.Background(), ns, "drink", ann.identity(), time.Time{})
	if err != nil || !strings.Contains(string(m.Value), "green tea") {
		t.Errorf("get after loomd refs rotate: %v %v", m, err)
	}
}
