package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

// userOp is one user request that answered 200: what it left on the key.
type userOp struct {
	key, op   string
	version   int64
	sha       string
	pinned    bool
	tombstone bool
}

// attrs are what the writers state about alice, each under a few keys: rows of one
// attribute are each other's peers, across keys.
var attrs = []string{"home city", "favourite colour", "employer", "car"}

// The seeds' resolver invariants, under memory.set, pin, unpin, delete, restore,
// Undo and an erasure in the same org, all concurrent with a resolver whose scripted
// model answers every pair of one attribute "update" at confidences on both sides
// of each threshold: no user write or pin is lost; nothing below the thresholds is
// acted on; nothing is written in the org while its erasure runs; each version is
// judged once, and a replay judges nothing; pinned rows are never touched; the
// anonymous user's sessions are never judged against each other.
func TestResolverInvariantsUnderConcurrentRequests(t *testing.T) {
	const org = "invariants"
	start := time.Now().UTC()
	w := startWorkers(t, org, []string{resolverWorker}, nil)
	confidences := []float64{0.99, 0.985, 0.975, 0.96, 0.93, 0.85}
	judge := newScriptedJudge(w.srv, func(newValue, peer string) (string, float64) {
		if strings.HasSuffix(newValue, "(seeded)") && attrOf(peer) == attrOf(newValue) {
			return "update", 0.99 // one retirement whatever the interleaving
		}
		if attrOf(newValue) != "" && attrOf(newValue) == attrOf(peer) {
			h := fnv.New32a()
			h.Write([]byte(newValue + "|" + peer))
			return "update", confidences[h.Sum32()%uint32(len(confidences))]
		}
		return "unrelated", 0.93
	}, nil)
	pool := env.PG(t)
	ctx := context.Background()
	ns, erased := testenv.Unique(t, "inv"), testenv.Unique(t, "mallory")
	alice := client.Identity{UserID: "alice"}
	for i := 0; i < 3; i++ {
		set(t, w.tc, erased, fmt.Sprintf("note-%d", i), fmt.Sprintf("mallory's note %d", i), client.Identity{UserID: "mallory"})
	}
	// The anonymous user's key in two sessions of one agent: separate tasks.
	bot1, bot2 := client.Identity{Agent: "bot", SessionID: "s1"}, client.Identity{Agent: "bot", SessionID: "s2"}
	set(t, w.tc, ns, "task", "the bot's task is build 41", bot1)
	set(t, w.tc, ns, "task", "the bot's task is build 42", bot2)

	// Under keys no writer below touches: an update the resolver retires for sure.
	set(t, w.tc, ns, "seed-old", "alice's car is value 0", alice)
	set(t, w.tc, ns, "seed-new", "alice's car is value 1 (seeded)", alice)

	var mu sync.Mutex
	var ops []userOp
	record := func(op userOp) {
		mu.Lock()
		ops = append(ops, op)
		mu.Unlock()
	}
	key := func(r *rand.Rand) string { return fmt.Sprintf("a%d-%d", r.Intn(len(attrs)), r.Intn(3)) }
	var wg sync.WaitGroup
	run := func(seed int64, n int, fn func(r *rand.Rand, i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed))
			for i := 0; i < n; i++ {
				fn(r, i)
				time.Sleep(time.Duration(r.Intn(40)) * time.Millisecond)
			}
		}()
	}
	var rev sync.Mutex
	next := 0
	for wr := 0; wr < 2; wr++ {
		run(int64(wr), 18, func(r *rand.Rand, i int) {
			k := key(r)
			rev.Lock()
			next++
			v := fmt.Sprintf("alice's %s is value %d", attrs[k[1]-'0'], next)
			rev.Unlock()
			if a, err := w.tc.Set(ctx, ns, k, client.SetRequest{Value: v, Identity: alice}); err == nil && a.Written {
				record(userOp{key: k, op: "set", version: a.Version, sha: a.ContentSHA256})
			}
		})
	}
	run(10, 12, func(r *rand.Rand, i int) {
		k := key(r)
		pin := w.tc.Pin
		if i%3 == 2 {
			pin = w.tc.Unpin
		}
		if a, err := pin(ctx, ns, k, alice); err == nil && a.Written {
			record(userOp{key: k, op: "pin", version: a.Version, pinned: a.Pinned, tombstone: a.Tombstone})
		}
	})
	run(20, 8, func(r *rand.Rand, i int) {
		k := key(r)
		if a, err := w.tc.Delete(ctx, ns, k, alice, ""); err == nil && a.Written {
			record(userOp{key: k, op: "delete", version: a.Version, pinned: a.Pinned, tombstone: true})
		}
		if a, err := w.tc.Restore(ctx, ns, k, alice); err == nil && a.Written {
			record(userOp{key: k, op: "restore", version: a.Version, pinned: a.Pinned, tombstone: a.Tombstone})
		}
	})
	run(30, 20, func(r *rand.Rand, i int) {
		k := key(r)
		if a, err := w.tc.Unsupersede(ctx, ns, k, alice); err == nil && a.Written {
			record(userOp{key: k, op: "undo", version: a.Version, pinned: a.Pinned, tombstone: a.Tombstone})
		}
	})
	time.Sleep(400 * time.Millisecond)
	erasure := w.c.Erasure(t, client.ErasureRequest{UserID: "mallory", Namespace: erased})
	wg.Wait()
	drained(t, pool, resolverWorker, org)

	// No user write or pin is lost: each key's head holds the value of its last write,
	// the pin of its last pin or unpin, the tombstone of its last delete or restore.
	last := map[string]map[string]userOp{}
	for _, o := range ops {
		kind := map[string]string{"set": "value", "pin": "pin", "delete": "life", "restore": "life", "undo": "life"}[o.op]
		if last[o.key] == nil {
			last[o.key] = map[string]userOp{}
		}
		if cur, ok := last[o.key][kind]; !ok || o.version > cur.version {
			last[o.key][kind] = o
		}
	}
	heads := map[string]map[string]any{}
	for k := range last {
		heads[k] = headRow(t, org, ns, k, alice)
	}
	for k, byKind := range last {
		h := heads[k]
		if v, ok := byKind["value"]; ok && h["content_sha256"] != v.sha {
			t.Errorf("%s: the head holds %v, not its last write's value %s", k, h["content_sha256"], v.sha)
		}
		if p, ok := byKind["pin"]; ok && h["pinned"] != p.pinned && (byKind["value"].version < p.version) {
			t.Errorf("%s: pinned %v, but its last pin or unpin left %v", k, h["pinned"], p.pinned)
		}
		if l, ok := byKind["life"]; ok && l.version > byKind["value"].version && h["tombstone"] != l.tombstone {
			t.Errorf("%s: tombstone %v, but its last delete or restore left %v", k, h["tombstone"], l.tombstone)
		}
	}

	// Every resolver revision is one of a judgement's pairs, acted on at its threshold.
	type revision struct {
		seq       int64
		op        string
		id        string
		requestID string
		pinned    bool
		at        time.Time
	}
	rows, err := pool.Query(ctx, `SELECT seq, op, memory_id::text, coalesce(audit->>'request_id', ''), (row->>'pinned')::bool, committed_at
		FROM loom.memory_revisions WHERE org = $1 AND op IN ('memory.auto_supersede', 'memory.conflict_flag', 'memory.conflict_clear') ORDER BY seq`, org)
	if err != nil {
		t.Fatal(err)
	}
	var resolverRevs []revision
	for rows.Next() {
		var r revision
		if err := rows.Scan(&r.seq, &r.op, &r.id, &r.requestID, &r.pinned, &r.at); err != nil {
			t.Fatal(err)
		}
		resolverRevs = append(resolverRevs, r)
	}
	rows.Close()
	stamps := readStamps(t, org)
	acted := map[string]map[string]bool{} // judgement → ids its done pairs wrote
	for _, st := range stamps {
		if st.erased {
			// the resolver judged it before the erasure removed its journal; the
			// stamp, ids and verdicts only, outlives it (internal/erasure/registry.go)
			continue
		}
		newValue := journalValue(t, org, st.memoryID, st.version)
		for _, p := range st.detail.Pairs {
			th := map[string]float64{"retire": 0.98, "flag": 0.95, "clear": 0.90}[p.Action]
			if p.Action == "none" {
				continue
			}
			call, ok := judgedWith(judge, newValue, journalValues(t, org, p.Peer))
			switch {
			case !ok:
				t.Errorf("stamp %s/%d acted (%s) on a pair the model never judged", st.memoryID, st.version, p.Action)
			case call.confidence < th || call.verdict != p.Verdict || call.confidence != p.Confidence:
				t.Errorf("stamp %s/%d: %s on %s at %.3f; the model said %s at %.3f (threshold %.2f)",
					st.memoryID, st.version, p.Action, p.Verdict, p.Confidence, call.verdict, call.confidence, th)
			case p.Action == "retire" && call.verdict != "update":
				t.Errorf("a retirement on a %s", call.verdict)
			}
			if p.Done {
				j := fmt.Sprintf("conflict_resolver:%s/%d", st.memoryID, st.version)
				if acted[j] == nil {
					acted[j] = map[string]bool{}
				}
				acted[j][st.memoryID], acted[j][p.Peer] = true, true
			}
		}
	}
	retired := 0
	for _, r := range resolverRevs {
		if !acted[r.requestID][r.id] {
			t.Errorf("resolver revision %d (%s of %s, %s) is no done pair of its judgement", r.seq, r.op, r.id, r.requestID)
		}
		if r.pinned {
			t.Errorf("resolver revision %d (%s) wrote a pinned row", r.seq, r.op)
		}
		if !r.at.Before(erasure.RequestedAt) && (erasure.FinishedAt == nil || !r.at.After(*erasure.FinishedAt)) {
			t.Errorf("resolver revision %d (%s) committed at %s, while the org's erasure ran (%s to %v)", r.seq, r.op, r.at, erasure.RequestedAt, erasure.FinishedAt)
		}
		if r.op == "memory.auto_supersede" {
			retired++
		}
	}
	if retired == 0 {
		t.Fatal("the resolver retired nothing: the test exercised no action")
	}
	// The anonymous user's sessions are separate tasks: never judged together.
	for _, p := range judge.calls() {
		if strings.Contains(p.newValue, "bot's task") {
			for _, peer := range p.peers {
				if strings.Contains(peer, "bot's task") {
					t.Errorf("the anonymous user's sessions were judged against each other: %+v", p)
				}
			}
		}
	}

	// A replay of the resolver's group from the test's start judges nothing again.
	calls, judged := len(judge.calls()), len(stamps)
	w.replay(start.Format(time.RFC3339Nano))
	drained(t, pool, resolverWorker, org)
	if n := len(judge.calls()); n != calls {
		t.Errorf("the replay made %d calls; want none", n-calls)
	}
	if n := len(readStamps(t, org)); n != judged {
		t.Errorf("the replay stamped %d more judgements", n-judged)
	}
	t.Logf("%d user requests, %d judgements (%d calls), %d resolver revisions (%d retirements)", len(ops), judged, calls, len(resolverRevs), retired)
}

func attrOf(v string) string {
	for _, a := range attrs {
		if strings.Contains(v, "alice's "+a+" is") {
			return a
		}
	}
	return ""
}

// stamp is a done resolver item.
type stamp struct {
	memoryID string
	version  int64
	// erased: an erasure removed the memory (loom.erased_memories), its journal with it
	erased bool
	detail struct {
		Calls int `json:"calls"`
		Pairs []struct {
			Peer       string  `json:"peer"`
			Verdict    string  `json:"verdict"`
			Confidence float64 `json:"confidence"`
			Action     string  `json:"action"`
			Done       bool    `json:"done"`
		} `json:"pairs"`
	}
}

func readStamps(t testing.TB, org string) []stamp {
	t.Helper()
	rows, err := env.PG(t).Query(context.Background(), `SELECT memory_id::text, version, coalesce(detail, 'null'::jsonb),
			EXISTS (SELECT 1 FROM loom.erased_memories e WHERE e.org = w.org AND e.namespace = w.namespace AND e.memory_id = w.memory_id)
		FROM loom.worker_items w WHERE worker = 'conflict_resolver' AND org = $1 AND state = 'done' AND outcome = 'judged'`, org)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []stamp
	for rows.Next() {
		var s stamp
		var raw []byte
		if err := rows.Scan(&s.memoryID, &s.version, &raw, &s.erased); err != nil {
			t.Fatal(err)
		}
		json.Unmarshal(raw, &s.detail)
		out = append(out, s)
	}
	return out
}

// journalValue is a memory's value at one version, from the journal.
func journalValue(t *testing.T, org, id string, version int64) string {
	t.Helper()
	var v string
	if err := env.PG(t).QueryRow(context.Background(), `SELECT coalesce(loom.opened_row(row, sealed, org, namespace, seq)->>'value', '') FROM loom.memory_revisions
		WHERE org = $1 AND memory_id = $2::uuid AND version = $3`, org, id, version).Scan(&v); err != nil {
		t.Fatalf("the journal's value of %s at %d: %v", id, version, err)
	}
	return v
}

// journalValues are every value a memory ever held.
func journalValues(t *testing.T, org, id string) []string {
	t.Helper()
	return testenv.PGStrings(t, env.PG(t), `SELECT DISTINCT coalesce(loom.opened_row(row, sealed, org, namespace, seq)->>'value', '') FROM loom.memory_revisions WHERE org = $1 AND memory_id = $2::uuid`, org, id)
}

func judgedWith(j *scriptedJudge, newValue string, peerValues []string) (judgeCall, bool) {
	for _, pv := range peerValues {
		if c, ok := j.verdict(newValue, pv); ok {
			return c, true
		}
	}
	return judgeCall{}, false
}

// headRow is a key's head as Postgres holds it.
func headRow(t *testing.T, org, ns, key string, id client.Identity) map[string]any {
	t.Helper()
	user := id.UserID
	var raw []byte
	// Opened: the value's plain content hash is sealed with its text (migration 101).
	if err := env.PG(t).QueryRow(context.Background(), `SELECT loom.opened_row(row, sealed, org, namespace, seq) FROM loom.memory_current
		WHERE org = $1 AND namespace = $2 AND agent = '-' AND user_id = loom.user_ref($1, $3) AND session_id = '-' AND memory_key = (SELECT loom.key_ref($1, $4))`,
		org, ns, user, key).Scan(&raw); err != nil {
		t.Fatalf("head of %s: %v", key, err)
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	return m
}
