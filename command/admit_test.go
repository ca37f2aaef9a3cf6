package command

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

var admitNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// writeOf is a parsed write of value to key under the default identity.
func writeOf(t *testing.T, key string, req setRequest) *setWrite {
	t.Helper()
	id := memrow.Identity{Org: "acme", Namespace: "ns", Agent: "-", UserID: "-", SessionID: "-", MemoryKey: key}
	w, err := newSetWrite("memory.set", auth.Principal{TokenID: "t1", Org: "acme"}, id, &req, "")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func value(s string) json.RawMessage { b, _ := json.Marshal(s); return b }

// headOfValue is a live active head of key holding text.
func headOfValue(key, text string) *memrow.Row {
	r := rowOf(key, text)
	r.Identity = memrow.Identity{Org: "acme", Namespace: "ns", Agent: "-", UserID: "-", SessionID: "-", MemoryKey: key}
	r.Version, r.ReinforcementCount, r.Tags, r.Confidence = 7, 2, []string{"kept"}, 0.6
	r.Sensitivity = memrow.SensitivityNormal
	return r
}

func rulesFor(cfg NamespaceConfig, blacklist ...string) admissionRules {
	pol := &policy{config: cfg, generation: 1}
	for _, p := range blacklist {
		pol.blacklist = append(pol.blacklist, blacklistEntry{pattern: p, re: regexp.MustCompile(p)})
	}
	return admissionRules{policy: pol, charLimit: 100, sensitiveRetention: 24 * time.Hour, conflictThreshold: 0.8, duplicateThreshold: 0.9}
}

func TestAdmitRefuses(t *testing.T) {
	locked := headOfValue("k", "the budget is fixed")
	locked.Locked = true
	pinned := headOfValue("k", "release on thursday")
	pinned.Pinned = true
	fact := headOfValue("k", "the office opens at 9")
	other := headOfValue("k", "the office opens at 10")
	other.UserID = "bob"
	ttl := 60
	cases := []struct {
		name     string
		head     *memrow.Row
		keyHeads []*memrow.Row
		req      setRequest
		bulk     bool
		rules    admissionRules
		want     refusalKind
		action   string
	}{
		{"a new value over a locked key", locked, nil, setRequest{Value: value("the budget doubled")}, false, rulesFor(DefaultConfig()), refusedLocked, "write"},
		{"a locked key's expiry moved", locked, nil, setRequest{Value: value("the budget is fixed"), TTLSeconds: &ttl}, false, rulesFor(DefaultConfig()), refusedLocked, "expire"},
		{"a new value over a pinned key", pinned, nil, setRequest{Value: value("release on friday")}, false, rulesFor(DefaultConfig()), refusedPinned, ""},
		{"over the type's char limit", nil, nil, setRequest{Value: value("a title far longer than ten"), MemoryType: "title"}, false,
			rulesFor(NamespaceConfig{ConflictPolicy: PolicyAutoReinforce, Types: map[string]TypeConfig{"title": {CharLimit: 10}}}), refusedCharLimit, ""},
		{"over the server's char limit", nil, nil, setRequest{Value: value(fmt.Sprintf("%0101d", 0))}, false, rulesFor(DefaultConfig()), refusedCharLimit, ""},
		{"a blacklisted value", nil, nil, setRequest{Value: value("Project  Falcon ships")}, false, rulesFor(DefaultConfig(), `(?i)project\s+falcon`), refusedBlacklisted, ""},
		{"a proposal over the key's fact", fact, []*memrow.Row{fact}, setRequest{Value: value("the office opens at 8"), Proposed: true}, false, rulesFor(DefaultConfig()), refusedKeyHoldsFact, ""},
		{"a proposal over another user's fact", nil, []*memrow.Row{other}, setRequest{Value: value("the office opens at 8"), Proposed: true}, false, rulesFor(DefaultConfig()), refusedKeyHoldsFact, ""},
		{"if_match_sha256 of another value", fact, []*memrow.Row{fact}, setRequest{Value: value("v2"), IfMatchSHA256: fmt.Sprintf("%064d", 0)}, false, rulesFor(DefaultConfig()), refusedPrecondition, ""},
		{"if_match_sha256 with no head", nil, nil, setRequest{Value: value("v2"), IfMatchSHA256: fact.ContentSHA256}, false, rulesFor(DefaultConfig()), refusedPrecondition, ""},
		{"a batch entry repeating its head", fact, []*memrow.Row{fact}, setRequest{Value: value("the office opens at 9")}, true, rulesFor(DefaultConfig()), refusedUnchanged, ""},
		{"the lock comes before the char limit", locked, nil, setRequest{Value: value(fmt.Sprintf("%0101d", 0))}, false, rulesFor(DefaultConfig()), refusedLocked, "write"},
		{"the blacklist comes before the lock's expiry", locked, nil, setRequest{Value: value("the budget is fixed"), TTLSeconds: &ttl}, false, rulesFor(DefaultConfig(), "budget"), refusedBlacklisted, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := writeOf(t, "k", tc.req)
			w.skipUnchanged = tc.bulk
			_, ref := admit(&entry{w: w, head: tc.head, keyHeads: tc.keyHeads}, admitNow, tc.rules)
			if ref == nil || ref.kind != tc.want || ref.action != tc.action {
				t.Fatalf("refusal %+v, want kind %d action %q", ref, tc.want, tc.action)
			}
			if ref.envelope() == nil {
				t.Fatal("a refusal memory.set cannot answer")
			}
		})
	}
}

func TestAdmitDrafts(t *testing.T) {
	head := headOfValue("k", "the build runs nightly")
	head.ConflictWith = []string{"peer-1"}
	head.Status = memrow.StatusConflicted
	proposal := headOfValue("k", "an idea")
	proposal.Status = memrow.StatusProposed
	duplicate := headOfValue("k", "the build runs nightly")
	duplicate.Status, duplicate.DuplicateOf = memrow.StatusDuplicate, "other"
	retype := NamespaceConfig{ConflictPolicy: PolicyAutoReinforce, Types: map[string]TypeConfig{"note": {Retype: "fact"}}}
	lockedHead := headOfValue("k", "kept as is")
	lockedHead.Locked = true
	at := admitNow.Add(time.Hour)
	lockedHead.ExpiresAt, lockedHead.OnExpire = &at, ExpireDemote
	conf := 0.3
	cases := []struct {
		name   string
		head   *memrow.Row
		req    setRequest
		update bool
		cfg    NamespaceConfig
		check  func(t *testing.T, d draft)
	}{
		{"a new key is active, with no reinforcement", nil, setRequest{Value: value("fresh")}, false, DefaultConfig(), func(t *testing.T, d draft) {
			if d.restatement || d.row.Status != memrow.StatusActive || d.row.ReinforcementCount != 0 || d.row.SourceClass != SourceDirect || d.row.Actor != "token:t1" {
				t.Fatalf("%+v", d.row)
			}
		}},
		{"the same bytes restate: reinforced, keeping status and links", head, setRequest{Value: value("the build runs nightly")}, false, DefaultConfig(), func(t *testing.T, d draft) {
			if !d.restatement || d.row.ReinforcementCount != 3 || d.row.Status != memrow.StatusConflicted || !slices.Equal(d.row.ConflictWith, []string{"peer-1"}) {
				t.Fatalf("%+v", d.row)
			}
		}},
		{"the same bytes over a head that is not established are not a restatement", duplicate, setRequest{Value: value("the build runs nightly")}, false, DefaultConfig(), func(t *testing.T, d draft) {
			if d.restatement || d.row.Status != memrow.StatusActive || d.row.DuplicateOf != "" {
				t.Fatalf("%+v", d.row)
			}
		}},
		{"an update of metadata keeps status, links and reinforcement", duplicate, setRequest{Value: value("the build runs nightly"), Confidence: &conf}, true, DefaultConfig(), func(t *testing.T, d draft) {
			if !d.restatement || d.row.Status != memrow.StatusDuplicate || d.row.DuplicateOf != "other" || d.row.ReinforcementCount != 2 || d.row.Confidence != 0.3 {
				t.Fatalf("%+v", d.row)
			}
		}},
		{"an update of a proposal revises it", proposal, setRequest{Value: value("a better idea")}, true, DefaultConfig(), func(t *testing.T, d draft) {
			if d.restatement || d.row.Status != memrow.StatusProposed {
				t.Fatalf("%+v", d.row)
			}
		}},
		{"a revision carries the head's id, tags and confidence", head, setRequest{Value: value("the build runs hourly"), SourceClass: SourceImported}, false, DefaultConfig(), func(t *testing.T, d draft) {
			if d.row.MemoryID != head.MemoryID || !slices.Equal(d.row.Tags, []string{"kept"}) || d.row.Confidence != 0.6 || d.row.SourceClass != SourceImported {
				t.Fatalf("%+v", d.row)
			}
		}},
		{"a retype names the requested type", nil, setRequest{Value: value("a note"), MemoryType: "note"}, false, retype, func(t *testing.T, d draft) {
			if d.row.MemoryType != "fact" || d.retypedFrom != "note" {
				t.Fatalf("type %s from %q", d.row.MemoryType, d.retypedFrom)
			}
		}},
		{"a detected secret stays high, with an advisory", nil, setRequest{Value: value("mail dana@example.org"), Sensitivity: memrow.SensitivityNormal}, false, DefaultConfig(), func(t *testing.T, d draft) {
			if d.row.Sensitivity != memrow.SensitivityHigh || len(d.advisories) != 1 || d.row.Embedded() || d.row.ExpiresAt == nil {
				t.Fatalf("%+v %v", d.row, d.advisories)
			}
		}},
		{"a locked row keeps its expiry", lockedHead, setRequest{Value: value("kept as is")}, false, NamespaceConfig{ConflictPolicy: PolicyAutoReinforce, RetentionDays: 1}, func(t *testing.T, d draft) {
			if d.row.ExpiresAt == nil || !d.row.ExpiresAt.Equal(at) || d.row.OnExpire != ExpireDemote || !d.row.Locked {
				t.Fatalf("%+v", d.row)
			}
		}},
		{"the type's threshold, else the namespace's", nil, setRequest{Value: value("x"), MemoryType: "note"},
			false, NamespaceConfig{ConflictPolicy: PolicyAutoReinforce, ConflictThreshold: ptr(0.7), Types: map[string]TypeConfig{"note": {DedupThreshold: ptr(0.95)}}}, func(t *testing.T, d draft) {
				if d.threshold != 0.95 {
					t.Fatalf("threshold %v", d.threshold)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := writeOf(t, "k", tc.req)
			w.requireHead, w.keepGraph = tc.update, tc.update
			var keyHeads []*memrow.Row
			if tc.head != nil {
				keyHeads = []*memrow.Row{tc.head}
			}
			d, ref := admit(&entry{w: w, head: tc.head, keyHeads: keyHeads}, admitNow, rulesFor(tc.cfg))
			if ref != nil {
				t.Fatalf("refused: %+v", ref)
			}
			tc.check(t, d)
		})
	}
}

// admitted is an entry the rules admitted, with its verdict.
func admitted(t *testing.T, w *setWrite, head *memrow.Row, keyHeads []*memrow.Row, v verdict) *entry {
	t.Helper()
	e := &entry{w: w, head: head, keyHeads: keyHeads}
	d, ref := admit(e, admitNow, rulesFor(DefaultConfig()))
	if ref != nil {
		t.Fatalf("refused: %+v", ref)
	}
	e.draft, e.v = d, v
	return e
}

func TestJudge(t *testing.T) {
	pinned := headOfValue("other", "the standup is at nine every morning")
	pinned.Pinned = true
	e := admitted(t, writeOf(t, "k", setRequest{Value: value("the standup is at ten every morning")}), nil, nil, verdict{})
	if _, ref := judge(e, []peer{{row: pinned, cosine: 0.95}}, rulesFor(DefaultConfig())); ref == nil || ref.kind != refusedPinnedPeer {
		t.Fatalf("a close pinned peer: %+v, want refused", ref)
	}
	same := headOfValue("other", "the standup is at ten every morning")
	if v, ref := judge(e, []peer{{row: same, cosine: 0.2}}, rulesFor(DefaultConfig())); ref != nil || v.kind != VerdictMerge || v.target != same {
		t.Fatalf("the same value under another key: %v %+v, want merge", v.kind, ref)
	}
	head := headOfValue("k", "the standup is at ten every morning")
	e = admitted(t, writeOf(t, "k", setRequest{Value: value("the standup is at ten every morning")}), head, []*memrow.Row{head}, verdict{})
	if v, _ := judge(e, []peer{{row: pinned, cosine: 0.99}}, rulesFor(DefaultConfig())); v.kind != VerdictRestatement || v.judged != nil {
		t.Fatalf("a restatement is judged: %+v", v)
	}
}

func TestWriteRows(t *testing.T) {
	peerRow := func(key string, locked bool) *memrow.Row {
		r := headOfValue(key, "the user lives in "+key)
		r.Locked = true
		r.Locked = locked
		return r
	}
	write := func(key string, req setRequest) *setWrite { return writeOf(t, key, req) }
	t.Run("a duplicate links its peer and is not served", func(t *testing.T) {
		p := peerRow("a", false)
		e := admitted(t, write("k", setRequest{Value: value("x")}), nil, nil, verdict{kind: VerdictDuplicate, target: p})
		rows, sup := writeRows("memory.set", []*entry{e}, PolicyAutoReinforce, admitNow)
		if len(rows) != 1 || e.row.Status != memrow.StatusDuplicate || e.row.DuplicateOf != p.MemoryID || sup != nil {
			t.Fatalf("rows %d, row %+v", len(rows), e.row)
		}
	})
	t.Run("refines supersedes the peer with a copy over the version read", func(t *testing.T) {
		p := peerRow("a", false)
		e := admitted(t, write("k", setRequest{Value: value("x")}), nil, nil, verdict{kind: VerdictRefines, target: p})
		rows, sup := writeRows("memory.set", []*entry{e}, PolicyNewestWins, admitNow)
		if len(rows) != 2 || !slices.Equal(sup, []string{p.MemoryID}) {
			t.Fatalf("rows %d, superseded %v", len(rows), sup)
		}
		c := rows[1]
		if c.own || c.event != events.TypeStatusChanged || c.readVersion != p.Version || c.row.Status != memrow.StatusSuperseded ||
			c.row.SupersededBy != e.row.MemoryID || p.Status != memrow.StatusActive {
			t.Fatalf("copy %+v, peer %+v", c, p)
		}
		if !rows[0].own || rows[0].event != events.TypeWritten {
			t.Fatalf("own row %+v", rows[0])
		}
	})
	t.Run("a locked peer stays, with an advisory", func(t *testing.T) {
		p := peerRow("a", true)
		e := admitted(t, write("k", setRequest{Value: value("x")}), nil, nil, verdict{kind: VerdictRefines, target: p})
		rows, _ := writeRows("memory.set", []*entry{e}, PolicyNewestWins, admitNow)
		if len(rows) != 1 || len(e.advisories) != 1 {
			t.Fatalf("rows %d, advisories %v", len(rows), e.advisories)
		}
		q := peerRow("b", true)
		e = admitted(t, write("k", setRequest{Value: value("x")}), nil, nil, verdict{kind: VerdictConflict, conflicts: []*memrow.Row{q}})
		if rows, _ := writeRows("memory.set", []*entry{e}, PolicyAutoReinforce, admitNow); len(rows) != 1 || len(e.advisories) != 1 ||
			!slices.Equal(e.row.ConflictWith, []string{q.MemoryID}) {
			t.Fatalf("rows %d, advisories %v, conflict_with %v", len(rows), e.advisories, e.row.ConflictWith)
		}
	})
	t.Run("a conflict flags both rows", func(t *testing.T) {
		a, b := peerRow("a", false), peerRow("b", false)
		e := admitted(t, write("k", setRequest{Value: value("x")}), nil, nil, verdict{kind: VerdictConflict, conflicts: []*memrow.Row{a, b}})
		rows, _ := writeRows("memory.set", []*entry{e}, PolicyAutoReinforce, admitNow)
		if len(rows) != 3 || e.row.Status != memrow.StatusConflicted || !slices.Equal(e.row.ConflictWith, []string{a.MemoryID, b.MemoryID}) {
			t.Fatalf("rows %d, row %+v", len(rows), e.row)
		}
		for _, c := range rows[1:] {
			if c.row.Status != memrow.StatusConflicted || !slices.Equal(c.row.ConflictWith, []string{e.row.MemoryID}) {
				t.Fatalf("mark %+v", c.row)
			}
		}
	})
	t.Run("a proposal flags and retires nothing", func(t *testing.T) {
		a := peerRow("a", false)
		e := admitted(t, write("k", setRequest{Value: value("x"), Proposed: true}), nil, nil, verdict{kind: VerdictConflict, conflicts: []*memrow.Row{a}})
		rows, _ := writeRows("memory.set", []*entry{e}, PolicyAutoReinforce, admitNow)
		if len(rows) != 1 || e.row.Status != memrow.StatusProposed || len(e.row.ConflictWith) != 1 {
			t.Fatalf("rows %d, row %+v", len(rows), e.row)
		}
		e = admitted(t, write("k", setRequest{Value: value("x"), Proposed: true}), nil, nil, verdict{kind: VerdictRefines, target: a})
		if rows, sup := writeRows("memory.set", []*entry{e}, PolicyNewestWins, admitNow); len(rows) != 1 || sup != nil || len(e.advisories) != 1 {
			t.Fatalf("rows %d, superseded %v", len(rows), sup)
		}
	})
	t.Run("the key in another session", func(t *testing.T) {
		s1 := headOfValue("plan", "deploy on monday")
		s1.SessionID = "s1"
		w := write("plan", setRequest{Value: value("deploy on wednesday"), SessionID: "s2"})
		w.id.SessionID = "s2"
		e := admitted(t, w, nil, []*memrow.Row{s1}, verdict{kind: VerdictNew})
		rows, sup := writeRows("memory.set", []*entry{e}, PolicyNewestWins, admitNow)
		if len(rows) != 2 || !slices.Equal(sup, []string{s1.MemoryID}) || rows[1].row.Status != memrow.StatusSuperseded {
			t.Fatalf("newest_wins: rows %d, superseded %v", len(rows), sup)
		}
		// The anonymous user's sessions are separate tasks: it is never marked owed.
		e = admitted(t, w, nil, []*memrow.Row{s1}, verdict{kind: VerdictNew})
		if rows, sup := writeRows("memory.set", []*entry{e}, PolicyAutoReinforce, admitNow); len(rows) != 1 || sup != nil || e.row.JudgementOwed {
			t.Fatalf("auto_reinforce, the anonymous user (separate tasks): rows %d, superseded %v, owed %v", len(rows), sup, e.row.JudgementOwed)
		}
		alice, aw := *s1, *w
		alice.UserID, aw.id.UserID = "alice", "alice"
		e = admitted(t, &aw, nil, []*memrow.Row{&alice}, verdict{kind: VerdictNew})
		if rows, sup := writeRows("memory.set", []*entry{e}, PolicyAutoReinforce, admitNow); len(rows) != 1 || sup != nil || !e.row.JudgementOwed {
			t.Fatalf("auto_reinforce, user alice: rows %d, superseded %v, owed %v", len(rows), sup, e.row.JudgementOwed)
		}
		locked := headOfValue("plan", "deploy on monday")
		locked.SessionID, locked.UserID, locked.Locked = "s1", "alice", true
		e = admitted(t, &aw, nil, []*memrow.Row{locked}, verdict{kind: VerdictNew})
		if rows, _ := writeRows("memory.set", []*entry{e}, PolicyNewestWins, admitNow); len(rows) != 1 || !e.row.JudgementOwed {
			t.Fatalf("a locked session's row: rows %d, owed %v", len(rows), e.row.JudgementOwed)
		}
	})
	t.Run("a batch changes each head once, in place when the batch writes it", func(t *testing.T) {
		shared := peerRow("shared", false)
		first := admitted(t, write("one", setRequest{Value: value("x")}), nil, nil, verdict{kind: VerdictConflict, conflicts: []*memrow.Row{shared}})
		second := admitted(t, write("two", setRequest{Value: value("y")}), nil, nil, verdict{kind: VerdictConflict, conflicts: []*memrow.Row{shared, first.row}})
		third := admitted(t, write("three", setRequest{Value: value("z")}), nil, nil, verdict{kind: VerdictRefines, target: second.row})
		rows, sup := writeRows("memory.bulk_set", []*entry{first, second, third}, PolicyNewestWins, admitNow)
		if len(rows) != 4 {
			t.Fatalf("%d rows, want the three entries and one copy of the shared head", len(rows))
		}
		if c := rows[3].row; c.Status != memrow.StatusConflicted || !slices.Equal(c.ConflictWith, []string{first.row.MemoryID, second.row.MemoryID}) {
			t.Fatalf("the shared head's copy %+v", c)
		}
		if !slices.Equal(first.row.ConflictWith, []string{shared.MemoryID, second.row.MemoryID}) {
			t.Fatalf("the earlier entry is marked in place: %v", first.row.ConflictWith)
		}
		if second.row.Status != memrow.StatusSuperseded || !slices.Equal(sup, []string{second.row.MemoryID}) {
			t.Fatalf("an entry refined by a later one: %+v, superseded %v", second.row, sup)
		}
	})
	t.Run("a head the batch writes anew gets no copy", func(t *testing.T) {
		target := peerRow("b", false)
		e1 := admitted(t, write("a", setRequest{Value: value("x")}), nil, nil, verdict{kind: VerdictRefines, target: target})
		e2 := admitted(t, write("b", setRequest{Value: value("y")}), target, []*memrow.Row{target}, verdict{kind: VerdictNew})
		rows, sup := writeRows("memory.bulk_set", []*entry{e1, e2}, PolicyNewestWins, admitNow)
		if len(rows) != 2 || !slices.Equal(sup, []string{target.MemoryID}) || rows[1].event != events.TypeRevised {
			t.Fatalf("rows %d, superseded %v", len(rows), sup)
		}
	})
}

func TestBatchPeers(t *testing.T) {
	vec := []float32{1, 0}
	e := admitted(t, writeOf(t, "k", setRequest{Value: value("the user lives in Berlin")}), nil, nil, verdict{})
	e.w.vector = vec
	sameValue := headOfValue("elsewhere", "the user lives in Berlin")
	retired := headOfValue("retired", "the user lives in Berlin")
	retired.Status = memrow.StatusSuperseded
	earlier := admitted(t, writeOf(t, "e", setRequest{Value: value("the user lives in Bonn")}), nil, nil, verdict{})
	earlier.w.vector = []float32{0.6, 0.8}
	sameKey := admitted(t, writeOf(t, "k", setRequest{Value: value("the user lives in Bonn")}), nil, nil, verdict{})
	sameKey.w.vector = vec
	gapRow := headOfValue("gap", "the user lives in Paris")
	gapOwn := headOfValue("k", "the user lives in Paris")
	peers := e.batchPeers(nil, []*memrow.Row{sameValue, retired}, []*entry{earlier, sameKey},
		[]peer{{row: gapRow, vector: []float32{0, 1}}, {row: gapOwn, vector: vec}}, admitNow)
	got := map[string]float64{}
	for _, p := range peers {
		got[p.row.MemoryKey] = p.cosine
	}
	want := map[string]float64{"elsewhere": 1, "e": float64(float32(0.6)), "gap": 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("peers %v, want %v (served rows of the value, earlier entries of other keys, gap rows that are peers)", got, want)
	}
	if peers[0].row != sameValue {
		t.Fatalf("peers are nearest first: %v", peers[0].row.MemoryKey)
	}
}

func TestRefusalEnvelopes(t *testing.T) {
	for _, tc := range []struct {
		ref    *refusal
		status int
		code   string
		extra  string
	}{
		{&refusal{kind: refusedLocked, action: "write"}, 423, "MEMORY_LOCKED", "refused_action=write"},
		{&refusal{kind: refusedLocked, action: "expire"}, 423, "MEMORY_LOCKED", "refused_action=expire"},
		{&refusal{kind: refusedPinned}, 409, "PINNED_CONFLICT", ""},
		{&refusal{kind: refusedPinnedPeer}, 409, "PINNED_CONFLICT", ""},
		{&refusal{kind: refusedBlacklisted}, 422, "BLACKLISTED", "field=value"},
		{&refusal{kind: refusedKeyHoldsFact}, 409, "KEY_HOLDS_FACT", ""},
		{&refusal{kind: refusedPrecondition}, 409, "PRECONDITION_FAILED", ""},
	} {
		var he *httperr.Error
		if err := envelope(fmt.Errorf("round: %w", tc.ref)); !errors.As(err, &he) || he.Status != tc.status || he.Code != tc.code {
			t.Fatalf("%v: %v, want %d %s", tc.ref, err, tc.status, tc.code)
		}
		if tc.extra != "" {
			k, v, _ := strings.Cut(tc.extra, "=")
			if he.Extra[k] != v {
				t.Fatalf("%v: extra %v, want %s", tc.ref, he.Extra, tc.extra)
			}
		}
	}
	limit := memrow.CheckCharLimit([]byte(`"abcdef"`), 2)
	if err := envelope(&refusal{kind: refusedCharLimit, cause: limit}); err != limit {
		t.Fatalf("a char limit answers its own error: %v", err)
	}
	if err := (&bulkAnswer{}).skip(3, &refusal{kind: refusedCharLimit, cause: limit}); fieldOf(err) != "entries[3].value" {
		t.Fatalf("a batch's char limit names its entry: %v", err)
	}
}
