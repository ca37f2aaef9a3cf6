package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/internal/text"
	"github.com/loomplane/loom/tests/testenv"
)

// metric is the value of one series of a process's /metrics ("name{labels}"), 0 when
// it is absent.
func metric(t *testing.T, tc *client.Client, series string) float64 {
	t.Helper()
	text, err := tc.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			fmt.Sscan(rest, &v)
		}
	}
	return v
}

// namespaceReads is how many namespaces the process's searches read from source
// (index or clickhouse), by its /metrics.
func namespaceReads(t *testing.T, tc *client.Client, source string) float64 {
	t.Helper()
	return metric(t, tc, `loom_search_namespace_reads_total{source="`+source+`"}`)
}

// Read-your-writes across processes: every write answered by one process is found by
// the very next search on another, a query-only replica with its own index, at the
// version the write answered.
func TestWriteThenSearchOnAnotherQueryReplica(t *testing.T) {
	n, writerURL := env.API(t, nil)
	_, readerURL, _ := env.Serve(t, []string{"query"}, nil)
	token := env.Token(t, n, auth.NewToken{Org: "acme"})
	writer, reader := testenv.NewClient(writerURL, token).Typed(t), testenv.NewClient(readerURL, token).Typed(t)
	ctx := context.Background()
	ns := testenv.Unique(t, "ryw")
	if _, err := writer.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("k%02d", i%10) // a third of the writes revise a key
		value := fmt.Sprintf("replica probe %d remembers the %s harbour", i, []string{"amber", "cobalt", "jade"}[i%3])
		w, err := writer.Set(ctx, ns, key, client.SetRequest{Value: value})
		if err != nil {
			t.Fatal(err)
		}
		found, err := reader.Search(ctx, ns, client.SearchRequest{Query: value, TopK: 3})
		if err != nil {
			t.Fatalf("search %d on the other replica: %v", i, err)
		}
		if !slices.ContainsFunc(found.Hits, func(h client.Hit) bool { return h.MemoryKey == key && h.Version == w.Version }) {
			t.Fatalf("write %d (%s at version %d) answered, the next search on another replica missed it: %+v", i, key, w.Version, found.Hits)
		}
	}
	if namespaceReads(t, reader, "index") < 30 || namespaceReads(t, reader, "clickhouse") != 0 {
		t.Fatalf("the replica's searches did not read its index: index %v, clickhouse %v",
			namespaceReads(t, reader, "index"), namespaceReads(t, reader, "clickhouse"))
	}
}

// indexProbe runs the four legs of a query directly over a process's index, after it
// caught up with the namespace, and lists the user:key of every hit (the vector leg
// ranks every document it holds) and of the lexical leg's.
func indexProbe(t *testing.T, n *app.Process, org, ns, q string) (all, lexical []string) {
	t.Helper()
	sp := searchindex.Space{Org: org, Namespace: ns}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Index().WaitFor(ctx, sp, testenv.Generation(t, env.PG(t), org, ns)); err != nil {
		t.Fatalf("the process's index did not catch up with %s: %v", ns, err)
	}
	vec, _ := embed.NewHash(384).Embed(context.Background(), []string{q})
	legs, _, err := n.Index().Search(sp, searchindex.Query{Filter: searchindex.Filter{Statuses: []string{"active", "conflicted", "superseded"},
		Now: time.Now()}, Vector: vec[0], Text: q, Terms: text.Terms(q), Limit: 100, K1: 1.2, B: 0.75})
	if err != nil {
		t.Fatal(err)
	}
	keys := func(hits []searchindex.Hit) []string {
		var out []string
		for _, h := range hits {
			if k := h.UserID + ":" + h.MemoryKey; !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return out
	}
	return keys(slices.Concat(legs.Vector, legs.Chunk, legs.Lexical, legs.Key)), keys(legs.Lexical)
}

// An erased user's memories and a redacted version are gone from the index of the
// process that served them, and a restarted process, which warms its index by
// replaying the topic, does not bring them back: not in a search, not in its index.
func TestErasedAndRedactedContentStaysGoneAfterARestart(t *testing.T) {
	n, url, stop := env.Serve(t, []string{"api"}, nil)
	org := testenv.Unique(t, "org")
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	ns := testenv.Unique(t, "gone")
	c.AppendOnly(t, ns)
	put := func(user, key, value string) map[string]any {
		r := c.Put(t, ns, key, map[string]any{"value": value, "user_id": user})
		if r.Status != http.StatusOK {
			t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
		}
		return r.JSON(t)
	}
	put("alice", "alice-boat", "alice keeps a sailboat called tern in the marina")
	put("alice", "alice-food", "alice is allergic to hazelnuts")
	put("bob", "bob-boat", "bob rows a sailboat on sundays")
	secret := put("bob", "bob-code", "bob's locker code is quokka seven")
	const probe = "sailboat marina tern hazelnuts quokka locker code alice bob"
	if _, lex := indexProbe(t, n, org, ns, "quokka"); fmt.Sprint(lex) != "[bob:bob-code]" {
		t.Fatalf("before the redaction the index finds quokka in %v", lex)
	}
	put("bob", "bob-code", "bob's locker code was changed")
	if got, _ := indexProbe(t, n, org, ns, probe); fmt.Sprint(got) != "[alice:alice-boat alice:alice-food bob:bob-boat bob:bob-code]" {
		t.Fatalf("before the erasure the index holds %v", got)
	}

	c.Erase(t, map[string]any{"user_id": "alice", "namespace": ns})
	if _, err := c.Typed(t).Redact(context.Background(), ns, "bob-code",
		client.RedactRequest{Version: secret["version_text"].(string), Identity: client.Identity{UserID: "bob"}}); err != nil {
		t.Fatalf("redact: %v", err)
	}
	check := func(n *app.Process, c *testenv.Client, when string) {
		t.Helper()
		if got, _ := indexProbe(t, n, org, ns, probe); fmt.Sprint(got) != "[bob:bob-boat bob:bob-code]" {
			t.Fatalf("%s the index holds %v; want bob's rows only", when, got)
		}
		if _, lex := indexProbe(t, n, org, ns, "quokka hazelnuts tern"); len(lex) != 0 {
			t.Fatalf("%s the index finds erased or redacted words in %v", when, lex)
		}
		for _, q := range []string{"sailboat called tern in the marina", "allergic to hazelnuts", "locker code quokka seven"} {
			hits := c.Search(t, ns, q, 10)
			if hits.Status != http.StatusOK {
				t.Fatalf("%s, search %q: %d %s", when, q, hits.Status, hits.Body)
			}
			// The hits, not the whole answer: the explain block restates the query's own words.
			served, err := json.Marshal(hits.JSON(t)["hits"])
			if err != nil {
				t.Fatal(err)
			}
			if body := string(served); strings.Contains(body, "alice") || strings.Contains(body, "quokka") || strings.Contains(body, "hazelnut") {
				t.Fatalf("%s, search %q serves erased or redacted content: %s", when, q, body)
			}
		}
	}
	check(n, c, "after the erasure and the redaction")

	stop()
	// No checkpoint: the restarted process replays the whole topic.
	m, url2, _ := env.Serve(t, []string{"api"}, func(c *config.Config) { c.SearchIndex.CheckpointDir = "" })
	c2 := testenv.NewClient(url2, c.Token)
	check(m, c2, "after a restart")
	if h, _ := m.IndexHealth(); h.Entries == 0 {
		t.Fatalf("the restarted process's index holds nothing: %+v", h)
	}
}

// Past LOOM_INDEX_MAX_BYTES the index drops namespaces from memory and the ClickHouse
// path serves them: searches and the writes' peer reads keep answering, behind the
// projection's watermark, and health says what was dropped.
func TestIndexBudgetOverflowIsServedByClickHouse(t *testing.T) {
	n, url := env.API(t, func(c *config.Config) { c.SearchIndex.MaxBytes = 1 })
	org := testenv.Unique(t, "org")
	tc := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org})).Typed(t)
	ctx := context.Background()
	ns := testenv.Unique(t, "budget")
	fact := "the budget review meets every second thursday in room nine"
	first, err := tc.Set(ctx, ns, "review", client.SetRequest{Value: fact})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the index to drop the namespace", func() bool {
		return !n.Index().Held(searchindex.Space{Org: org, Namespace: ns})
	})
	// The peer read now reads ClickHouse: the same fact under another key is judged
	// against the first.
	again, err := tc.Set(ctx, ns, "review-again", client.SetRequest{Value: fact})
	if err != nil {
		t.Fatal(err)
	}
	if again.Written && again.Verdict == "new" {
		t.Fatalf("the same fact under another key was admitted as new: %+v", again)
	}
	found, err := tc.Search(ctx, ns, client.SearchRequest{Query: "budget review thursday", TopK: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(found.Hits) == 0 || found.Hits[0].MemoryID != first.MemoryID {
		t.Fatalf("search of a namespace past the budget: %+v", found.Hits)
	}
	if namespaceReads(t, tc, "clickhouse") == 0 {
		t.Fatal("the search did not read ClickHouse")
	}
	h, err := env.Operator(t, url).Typed(t).Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Index == nil || h.Index.BudgetBytes != 1 || h.Index.Evicted == 0 || h.Index.NamespacesHeld != 0 {
		t.Fatalf("health of an index past its budget: %+v", h.Index)
	}
}
