package workers

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

const embeddingWorker = "embedding_worker"

// An embedder outage no longer fails namespace.restore and namespace.rollback: they
// commit embedding stubs, which search finds by their words but not by their vector;
// once the embedder answers again the embedding worker fills them through the one
// commit, and search's vector leg finds them. A replay of the worker's group embeds
// nothing again.
func TestRestoreAndRollbackCommitStubsTheEmbeddingWorkerFills(t *testing.T) {
	const org = "embedstubs"
	w := startWorkers(t, org, []string{embeddingWorker}, nil)
	// The process embeds through the scripted server, which the test takes down; the
	// embedding worker is off until the stubs were searched (a search embeds its query,
	// so it needs the embedder back).
	worker := false
	w.mod = func(c *config.Config) {
		c.Embedder.Kind, c.Embedder.OpenAI.BaseURL, c.Embedder.OpenAI.Model, c.Embedder.Dim = "openai", w.srv.URL, "scripted-embedder", 16
		c.Workers.Embedding.Enabled, c.Workers.Embedding.Interval = worker, 100*time.Millisecond
	}
	w.stop()
	w.serve()
	ctx := context.Background()
	pool := env.PG(t)
	src, dst := testenv.Unique(t, "stubsrc"), testenv.Unique(t, "stubdst")

	set := func(ns, key, value string) {
		t.Helper()
		if _, err := w.tc.Set(ctx, ns, key, client.SetRequest{Value: value}); err != nil {
			t.Fatalf("set %s/%s: %v", ns, key, err)
		}
	}
	set(src, "region", "the staging database lives in eu-west-2")
	set(src, "window", "the deploy window is tuesday morning")
	time.Sleep(5 * time.Millisecond)
	asOf := time.Now()
	time.Sleep(5 * time.Millisecond)
	set(src, "window", "the deploy window is thursday evening")
	st, err := w.tc.SnapshotNamespace(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := io.ReadAll(st)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	w.srv.EmbedDown(true)
	if _, err := w.tc.Set(ctx, src, "other", client.SetRequest{Value: "a write while the embedder is down"}); !isCode(err, client.CodeEmbedderUnavailable) {
		t.Fatalf("memory.set with the embedder down: %v, want 503 EMBEDDER_UNAVAILABLE (a write's verdict needs its vector)", err)
	}
	restored, err := w.tc.RestoreNamespace(ctx, dst, payload)
	if err != nil {
		t.Fatalf("namespace.restore with the embedder down: %v, want it to commit stubs", err)
	}
	if restored.Counts.Restored != 2 {
		t.Fatalf("restore: %+v, want 2 rows restored", restored.Counts)
	}
	rb, err := w.tc.RollbackNamespace(ctx, src, client.RollbackRequest{AsOf: asOf, DryRun: ptr(false)})
	if err != nil {
		t.Fatalf("namespace.rollback with the embedder down: %v, want it to commit a stub", err)
	}
	if rb.Counts.Reinstated != 1 {
		t.Fatalf("rollback: %+v, want the window's earlier value reinstated", rb.Counts)
	}

	w.srv.EmbedDown(false)
	// hit searches ns for query by its default legs and answers the key's hit, or nil.
	hit := func(ns, query, key string) *client.Hit {
		t.Helper()
		ans, err := w.tc.Search(ctx, ns, client.SearchRequest{Query: query, TopK: 5})
		if err != nil {
			t.Fatalf("search %s: %v", ns, err)
		}
		for i := range ans.Hits {
			if ans.Hits[i].MemoryKey == key {
				return &ans.Hits[i]
			}
		}
		return nil
	}
	for _, c := range []struct{ ns, query, key string }{
		{dst, "staging database eu-west-2", "region"}, {src, "deploy window tuesday", "window"},
	} {
		h := hit(c.ns, c.query, c.key)
		if h == nil || h.Scores.Vector != 0 {
			t.Fatalf("a stub in %s: hit %+v; want it found by its words, with no vector score", c.ns, h)
		}
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_current WHERE org = $1 AND (row->>'embedding_dim')::int = 0
		AND NOT (row->>'tombstone')::boolean`, org); n != 3 {
		t.Fatalf("%d stub heads, want 3 (the two restored rows and the reinstated one)", n)
	}

	worker = true
	w.stop()
	w.serve()
	drained(t, pool, embeddingWorker, org)
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_current WHERE org = $1 AND (row->>'embedding_dim')::int = 0
		AND NOT (row->>'tombstone')::boolean`, org); n != 0 {
		t.Fatalf("%d stub heads left after the worker drained, want 0", n)
	}
	for _, c := range []struct{ ns, query, key string }{
		{dst, "staging database eu-west-2", "region"}, {src, "deploy window tuesday", "window"},
	} {
		testenv.Eventually(t, 30*time.Second, "the vector leg to find "+c.ns+"/"+c.key, func() bool {
			h := hit(c.ns, c.query, c.key)
			return h != nil && h.Scores.Vector > 0
		})
	}
	embedded := testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = $1 AND org = $2 AND outcome = 'embedded'`, embeddingWorker, org)
	if embedded != 3 {
		t.Fatalf("%d stubs embedded, want 3", embedded)
	}
	// The operator's health names the pass and what it did here.
	h, err := w.tc.WithToken(env.Token(t, w.n, auth.NewToken{Role: auth.RoleOperator})).Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := h.Passes[embeddingWorker]; !ok || !p.Enabled || p.RowsDone < 3 || p.LastRun == nil || p.RowsOwed != 0 {
		t.Fatalf("health's embedding_worker: %+v (present %t), want enabled, 3 rows done or more, none owed", p, ok)
	}
	// The usage fold's amendments (the searches above count recalls) are not the worker's.
	revisions := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND op <> 'memory.usage_fold'`, org)

	// A replay of the worker's group queues the stubs again, finds them stamped and
	// commits nothing.
	w.replay("earliest")
	drained(t, pool, embeddingWorker, org)
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND op <> 'memory.usage_fold'`, org); n != revisions {
		t.Fatalf("the replay committed %d revisions, want none", n-revisions)
	}
}
func ptr[T any](v T) *T { return &v }
