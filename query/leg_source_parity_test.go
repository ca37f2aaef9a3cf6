package query_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/query"
	"github.com/loomplane/loom/tests/testenv"
)

// The leg sources' parity suite: one set of memories is written through a loomd process
// over the real stores (Postgres, kfake, ClickHouse), so the same revisions reach the
// process's search index and ClickHouse's search tables; then every leg of both sources
// is asked the same questions, under every filter a search narrows by, and must answer
// the same hits. As Jaeger runs one storage integration suite against every backend:
// a source that answers differently (a filter one store forgets, a score computed
// another way) fails here, not as a search that changes with a process's memory budget.
//
// Scores: the lexical and key legs compute the same float64 arithmetic in both stores,
// so they agree to rounding (exactTolerance). The vector and chunk legs do not: the
// index holds each vector as int8 codes with one scale (x ≈ scale·code, rounded to half a
// step of max|x|/127 per component) and scores the float32 query against them, while
// ClickHouse reads the float32 vector. For unit vectors the error is a sum of the
// components' independent roundings, so it stays far below its bound √dim·max|x|/254
// (every rounding aligned with the query): over this suite's 1,500 vector hits of the
// hash embedder's 384 dimensions it reached 0.004. quantisedTolerance is 0.01. The
// chunk leg differs in two more ways, by design of ClickHouse's tables (chunkRows).
const (
	exactTolerance     = 1e-9
	quantisedTolerance = 0.01
)

// parityMemory is one memory the suite writes.
type parityMemory struct {
	key string
	req client.SetRequest
	// after is what happens to it once written: "delete", or "rewrite" (another value).
	after string
}

// parityMemories are varied in every column a leg filters or scores by: agents, users,
// sessions, types, tags, statuses, validity, expiry, sensitivity, deletion, a rewrite,
// long values (chunks), key words and terms repeated at different lengths.
func parityMemories(now time.Time) []parityMemory {
	topics := []struct{ key, words string }{
		{"crane-maintenance", "the harbour crane needs maintenance before the cobalt containers arrive"},
		{"ferry-schedule", "the ferry schedule changes when the tide gauge reads high"},
		{"tide-gauge-reading", "the tide gauge at the north pier reads two metres at night"},
		{"night-shift-roster", "the night shift roster puts two crane drivers on the pier"},
		{"pier-lights", "the pier lights stay on through the night shift"},
		{"cobalt-order", "the cobalt order ships in forty containers from the harbour"},
	}
	var out []parityMemory
	for i := 0; i < 36; i++ {
		tp := topics[i%len(topics)]
		value := fmt.Sprintf("Note %d: %s.%s", i, tp.words, strings.Repeat(" "+strings.Fields(tp.words)[1]+" again.", i%4))
		if i%9 == 0 {
			var b strings.Builder
			for j := 0; b.Len() < 1500; j++ {
				fmt.Fprintf(&b, "Section %d of report %d: %s. ", j, i, topics[(i+j)%len(topics)].words)
			}
			value = b.String()
		}
		req := client.SetRequest{
			Value:      value,
			Identity:   client.Identity{Agent: []string{"planner", "scout"}[i%2], UserID: []string{"ana", "ben", ""}[i%3]},
			MemoryType: []string{"fact", "fact", "preference"}[i%3],
			Tags:       [][]string{nil, {"ops"}, {"ops", "night"}, {"harbour"}}[i%4],
		}
		if i%4 == 0 {
			req.SessionID = "s1"
		}
		m := parityMemory{key: fmt.Sprintf("%s-%02d", tp.key, i), req: req}
		switch i {
		case 7:
			m.req.Sensitivity = "high"
		case 11, 29:
			m.req.Proposed = true
		case 13:
			m.req.ValidTo = now.Add(time.Hour)
		case 17:
			m.req.TTLSeconds = 1
		case 19:
			m.after = "delete"
		case 23:
			m.after = "rewrite"
		}
		out = append(out, m)
	}
	return out
}

// parityQueries are asked under every filter: each topic's words, a key verbatim, words
// of several topics, and words no memory holds.
var parityQueries = []string{
	"harbour crane maintenance",
	"cobalt containers from the harbour",
	"night shift roster",
	"tide gauge",
	"ferry-schedule-01",
	"what lights the pier at night",
	"zebra quantum",
}

// parityFilters narrow the questions as a search's filters do.
func parityFilters(asOf time.Time) map[string]func(*query.LegQuestion) {
	return map[string]func(*query.LegQuestion){
		"none":        func(*query.LegQuestion) {},
		"agent":       func(q *query.LegQuestion) { q.Agent = "planner" },
		"user":        func(q *query.LegQuestion) { q.UserID = "ana" },
		"session":     func(q *query.LegQuestion) { q.SessionID = "s1" },
		"memory type": func(q *query.LegQuestion) { q.MemoryType = "preference" },
		"tags, all":   func(q *query.LegQuestion) { q.Tags = []string{"ops", "night"} },
		"tags, any":   func(q *query.LegQuestion) { q.Tags, q.TagsAny = []string{"night", "harbour"}, true },
		"proposed":    func(q *query.LegQuestion) { q.Statuses = []memrow.Status{memrow.StatusProposed} },
		"every status": func(q *query.LegQuestion) {
			q.Statuses = []memrow.Status{memrow.StatusActive, memrow.StatusConflicted, memrow.StatusProposed, memrow.StatusSuperseded, memrow.StatusDuplicate}
		},
		"as of":            func(q *query.LegQuestion) { q.AsOf = &asOf },
		"agent, user, tag": func(q *query.LegQuestion) { q.Agent, q.UserID, q.Tags = "scout", "ben", []string{"ops"} },
	}
}

func TestLegSourcesAnswerAlike(t *testing.T) {
	ctx := context.Background()
	n, tc := parityProcess(t)
	ns := testenv.Unique(t, "parity")
	if _, err := tc.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	memories := parityMemories(now)
	expired := writeParityMemories(t, tc, ns, memories)
	// The memory with a one-second lifetime has expired for both stores' clocks.
	testenv.Eventually(t, time.Minute, "the short-lived memory to expire", func() bool { return time.Now().After(expired.Add(time.Second)) })
	waitForBothStores(t, n, "acme", ns)

	tags := map[string][]string{}
	for _, m := range memories {
		tags[m.key] = m.req.Tags
	}
	seen, worst := map[query.Leg]int{}, map[query.Leg]float64{}
	untagged := 0
	for name, narrow := range parityFilters(now.Add(2 * time.Hour)) {
		for _, text := range parityQueries {
			for _, limit := range []int{100, 5} {
				q := query.LegQuestion{Org: "acme", Namespace: ns, Query: text, Limit: limit}
				narrow(&q)
				what := fmt.Sprintf("%q under filter %s, limit %d", text, name, limit)
				index, err := n.Query.AskLegs(ctx, query.SourceIndex, q)
				if err != nil {
					t.Fatalf("%s: the index: %v", what, err)
				}
				clickhouse, err := n.Query.AskLegs(ctx, query.SourceClickHouse, q)
				if err != nil {
					t.Fatalf("%s: ClickHouse: %v", what, err)
				}
				for _, leg := range []query.Leg{query.LegVector, query.LegChunk, query.LegLexical, query.LegKey} {
					ix := answer{hits: index[leg], cut: len(index[leg]) == limit}
					cx := answer{hits: clickhouse[leg], cut: len(clickhouse[leg]) == limit}
					if leg == query.LegChunk {
						var dropped int
						cx.hits, dropped = chunkRows(cx.hits, q, tags)
						untagged += dropped
					}
					worst[leg] = max(worst[leg], sameHits(t, what+", "+string(leg)+" leg", ix, cx, legTolerance(leg)))
					seen[leg] += len(cx.hits)
				}
			}
		}
	}
	// The suite compares something in every leg.
	for _, leg := range []query.Leg{query.LegVector, query.LegChunk, query.LegLexical, query.LegKey} {
		if seen[leg] == 0 {
			t.Errorf("no question found a hit in the %s leg: the suite compares nothing there", leg)
		}
		t.Logf("%s leg: %d hits compared, the stores' scores at most %.2g apart", leg, seen[leg], worst[leg])
	}
	t.Logf("ClickHouse's chunk leg answered %d rows the filter's tags refuse", untagged)
}

// chunkRows is ClickHouse's chunk leg as the index answers it, by the two ways the
// stores differ there (both leave the search's answer alone): ClickHouse answers a hit
// per window, which fusion folds onto its row, where the index answers each row's best
// window; and ClickHouse's windows carry no tags, so its chunk leg does not narrow by
// them, leaving it to validation against the heads, where the index's does. It keeps
// each row's best window and drops the rows the question's tags refuse, and answers
// how many it dropped for their tags.
func chunkRows(hits []query.LegHit, q query.LegQuestion, tags map[string][]string) (rows []query.LegHit, untagged int) {
	seen := map[memrow.Identity]bool{}
	for _, h := range hits {
		if seen[h.ID] {
			continue
		}
		seen[h.ID] = true
		if !tagsMatch(tags[h.ID.MemoryKey], q.Tags, q.TagsAny) {
			untagged++
			continue
		}
		rows = append(rows, h)
	}
	return rows, untagged
}

func tagsMatch(have, want []string, anyOf bool) bool {
	if len(want) == 0 {
		return true
	}
	for _, w := range want {
		if slices.Contains(have, w) == anyOf {
			return anyOf
		}
	}
	return !anyOf
}

// appProcess is the suite's loomd process and a pool on its Postgres.
type appProcess struct {
	*app.Process
	pg *pgxpool.Pool
}

// parityProcess runs the stores, the relay and the projector, and a process serving the
// command and query roles with its own search index, all until the test ends; it
// answers the process and a client of org acme.
func parityProcess(t *testing.T) (*appProcess, *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	env, err := testenv.Start(ctx, testenv.Options{})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stack.Stop(); err != nil {
			t.Errorf("stop the stores: %v", err)
		}
	})
	bg, stop := context.WithCancel(context.Background())
	t.Cleanup(func() { stop(); time.Sleep(200 * time.Millisecond) }) // the pipeline's process closes as the stores stay up
	if err := env.RunPipeline(bg); err != nil {
		t.Fatal(err)
	}
	n, url := env.API(t, nil)
	token := env.Token(t, n, auth.NewToken{Org: "acme"})
	return &appProcess{Process: n, pg: env.PG(t)}, testenv.NewClient(url, token).Typed(t)
}

// writeParityMemories writes the memories and what follows each; it answers when the
// short-lived one expires.
func writeParityMemories(t *testing.T, tc *client.Client, ns string, memories []parityMemory) (expires time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, m := range memories {
		a, err := tc.Set(ctx, ns, m.key, m.req)
		if err != nil {
			t.Fatalf("set %s: %v", m.key, err)
		}
		if a.ExpiresAt != nil {
			expires = *a.ExpiresAt
		}
		switch m.after {
		case "delete":
			if _, err := tc.Delete(ctx, ns, m.key, m.req.Identity, ""); err != nil {
				t.Fatalf("delete %s: %v", m.key, err)
			}
		case "rewrite":
			m.req.Value = fmt.Sprintf("%s, rewritten: the ferry leaves the harbour before the tide turns", m.req.Value)
			if _, err := tc.Set(ctx, ns, m.key, m.req); err != nil {
				t.Fatalf("rewrite %s: %v", m.key, err)
			}
		}
	}
	if expires.IsZero() {
		t.Fatal("no memory answered an expiry")
	}
	return expires
}

// waitForBothStores waits until the projection and the process's index have applied
// every revision of the namespace.
func waitForBothStores(t *testing.T, n *appProcess, org, ns string) {
	t.Helper()
	testenv.WaitProjected(t, n.pg, n.Cfg.Pipeline.Projection, org, ns)
	gen := testenv.Generation(t, n.pg, org, ns)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.Index().WaitFor(ctx, searchindex.Space{Org: org, Namespace: ns}, gen); err != nil {
		t.Fatalf("the index did not reach generation %d: %v", gen, err)
	}
}

func legTolerance(leg query.Leg) float64 {
	if leg == query.LegVector || leg == query.LegChunk {
		return quantisedTolerance
	}
	return exactTolerance
}

// answer is one store's hits of one leg; cut: they filled the limit, so rows past it
// may be missing.
type answer struct {
	hits []query.LegHit
	cut  bool
}

// sameHits asserts that two stores' answers to one leg hold the same rows (at the same
// content) with scores and coverage within tol, each best first. An answer that filled
// its limit was cut: a row only the other store answered must then score within tol
// of the cut, where the stores' rounding may order rows differently. It answers the
// largest difference of a row's scores.
func sameHits(t *testing.T, what string, index, clickhouse answer, tol float64) (worst float64) {
	t.Helper()
	for store, a := range map[string]answer{"the index": index, "ClickHouse": clickhouse} {
		for i := 1; i < len(a.hits); i++ {
			if a.hits[i].Score > a.hits[i-1].Score {
				t.Errorf("%s: %s answered hit %d (%.6f) above hit %d (%.6f)", what, store, i, a.hits[i].Score, i-1, a.hits[i-1].Score)
			}
		}
	}
	byKey := func(hits []query.LegHit) map[string]query.LegHit {
		out := map[string]query.LegHit{}
		for _, h := range hits {
			out[fmt.Sprintf("%+v@%s", h.ID, h.ContentSHA256)] = h
		}
		return out
	}
	ix, cx := byKey(index.hits), byKey(clickhouse.hits)
	onlyIn := func(store string, mine, theirs map[string]query.LegHit, other answer) {
		for k, h := range mine {
			if _, ok := theirs[k]; ok {
				continue
			}
			if other.cut && (len(other.hits) == 0 || h.Score <= other.hits[len(other.hits)-1].Score+tol) {
				continue // past the other's cut
			}
			t.Errorf("%s: only %s answered %s (score %.6f); the other answered %d hits", what, store, k, h.Score, len(other.hits))
		}
	}
	onlyIn("the index", ix, cx, clickhouse)
	onlyIn("ClickHouse", cx, ix, index)
	for k, a := range ix {
		b, ok := cx[k]
		if !ok {
			continue
		}
		worst = max(worst, math.Abs(a.Score-b.Score))
		if math.Abs(a.Score-b.Score) > tol*math.Max(1, math.Abs(b.Score)) {
			t.Errorf("%s: %s scores %.9f in the index, %.9f in ClickHouse", what, k, a.Score, b.Score)
		}
		if math.Abs(a.Coverage-b.Coverage) > exactTolerance {
			t.Errorf("%s: %s covers %.9f in the index, %.9f in ClickHouse", what, k, a.Coverage, b.Coverage)
		}
		if a.MemoryType != b.MemoryType {
			t.Errorf("%s: %s is of type %q in the index, %q in ClickHouse", what, k, a.MemoryType, b.MemoryType)
		}
	}
	return worst
}
