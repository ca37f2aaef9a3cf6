package workers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// Every memory a search serves counts one recall, and the usage fold folds the count
// into the memory's recall_count, which memory.get and later hits show: a memory three
// searches served reads recall_count 3 with its version kept, one no search served
// reads 0, and the counts folded are gone from the table.
func TestSearchHitsAreCountedAsRecallsAndFolded(t *testing.T) {
	const org = "recalls"
	w := startWorkers(t, org, nil, foldingUsage)
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "recall")
	served := lunchAndParking(t, w, ns)
	for i := 0; i < 3; i++ {
		ans, err := w.tc.Search(ctx, ns, client.SearchRequest{Query: "when is the team lunch", TopK: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(ans.Hits) != 1 || ans.Hits[0].MemoryKey != "lunch" {
			t.Fatalf("search %d: %+v; want the lunch memory alone", i, ans.Hits)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the recalls counted and folded", func() bool {
		m, err := w.tc.Get(ctx, ns, "lunch", client.Identity{}, time.Time{})
		return err == nil && m.RecallCount == 3 &&
			testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_touches WHERE org = $1 AND namespace = $2`, org, ns) == 0
	})
	lunch, parking := get(t, w.tc, ns, "lunch", client.Identity{}), get(t, w.tc, ns, "parking", client.Identity{})
	if lunch.VersionText != served.VersionText || lunch.ReinforcementCount != 0 {
		t.Fatalf("lunch after three searches: version %s, reinforcement %d; want its version %s kept and no reinforcement",
			lunch.VersionText, lunch.ReinforcementCount, served.VersionText)
	}
	if parking.RecallCount != 0 {
		t.Fatalf("parking, which no search served: recall_count %d", parking.RecallCount)
	}
	// The projection carries the folded count: the history read behind the barrier
	// (memory.get ?as_of, ClickHouse's memory_versions) answers it as the head does.
	past, err := w.tc.Get(ctx, ns, "lunch", client.Identity{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if past.RecallCount != 3 || past.VersionText != served.VersionText {
		t.Fatalf("lunch as of now: recall_count %d at version %s; want 3 at %s", past.RecallCount, past.VersionText, served.VersionText)
	}
	// The search index learns the folded count from the topic: a hit shows it.
	testenv.Eventually(t, 30*time.Second, "a hit showing the folded recalls", func() bool {
		ans, err := w.tc.Search(ctx, ns, client.SearchRequest{Query: "when is the team lunch", TopK: 1})
		return err == nil && len(ans.Hits) == 1 && ans.Hits[0].RecallCount >= 3
	})
}

// A memory served again and again has its recalls published once per
// LOOM_USAGE_RECALL_INTERVAL_MS, not every publication round: each publication is a
// usage_fold revision of it, and a search workload was paying for hundreds of them a
// minute. Three searches in three rounds leave the count held and no revision; a touch
// is published at once and takes the held recalls along, in one revision.
func TestRecallsAreHeldAndFoldedWithTheNextTouch(t *testing.T) {
	const org = "recallsheld"
	w := startWorkers(t, org, nil, func(c *config.Config) {
		foldingUsage(c)
		c.Command.RecallPublishInterval = time.Hour
	})
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "held")
	served := lunchAndParking(t, w, ns)
	folds := func() int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND op = 'memory.usage_fold'`, org, ns)
	}
	// Each search's count is its own flush (a second apart), published by its own
	// round (every 100 ms) unless held.
	for i := 0; i < 3; i++ {
		if i > 0 {
			time.Sleep(1500 * time.Millisecond)
		}
		ans, err := w.tc.Search(ctx, ns, client.SearchRequest{Query: "when is the team lunch", TopK: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(ans.Hits) != 1 || ans.Hits[0].MemoryKey != "lunch" {
			t.Fatalf("search %d: %+v; want the lunch memory alone", i, ans.Hits)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the three recalls counted", func() bool {
		return testenv.Int(t, pool, `SELECT coalesce(sum(recalls), 0) FROM loom.memory_touches WHERE org = $1 AND namespace = $2 AND memory_id = $3`,
			org, ns, served.MemoryID) == 3 || folds() > 0
	})
	time.Sleep(time.Second) // ten publication rounds
	if n := folds(); n != 0 {
		t.Fatalf("%d usage_fold revisions of a memory only searched, within its recall interval; want none", n)
	}
	if _, err := w.tc.Touch(ctx, ns, "lunch", client.Identity{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the touch folded with the held recalls", func() bool {
		m, err := w.tc.Get(ctx, ns, "lunch", client.Identity{}, time.Time{})
		return err == nil && m.ReinforcementCount == 1 && m.RecallCount == 3
	})
	if n := folds(); n != 1 {
		t.Fatalf("%d usage_fold revisions for three searches and a touch; want one", n)
	}
	if m := get(t, w.tc, ns, "lunch", client.Identity{}); m.VersionText != served.VersionText {
		t.Fatalf("lunch after the fold: version %s; want %s kept", m.VersionText, served.VersionText)
	}
}

// lunchAndParking writes the recall tests' two memories in an append-only ns: lunch,
// which their searches serve (its answer), and parking, which none does.
func lunchAndParking(t *testing.T, w *workers, ns string) *client.SetAnswer {
	t.Helper()
	ctx := context.Background()
	if _, err := w.tc.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatal(err)
	}
	served, err := w.tc.Set(ctx, ns, "lunch", client.SetRequest{Value: "the team lunch is on friday at noon"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.tc.Set(ctx, ns, "parking", client.SetRequest{Value: "visitor parking is behind building C"}); err != nil {
		t.Fatal(err)
	}
	return served
}

// The usage fold folds every memory one usage record counts in one commit, not a
// commit each: a search workload's record names every memory it served. Each memory's
// recall_count grows by exactly the searches that served it, and its fold revisions
// share their transaction.
func TestMemoriesServedTogetherAreFoldedInOneCommit(t *testing.T) {
	const org = "recallsbatch"
	w := startWorkers(t, org, nil, func(c *config.Config) {
		foldingUsage(c)
		// The first search's flush makes every served memory's row; the later searches'
		// recalls join those rows, published together once the first is this old.
		c.Command.RecallPublishInterval = 3 * time.Second
	})
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "batch")
	if _, err := w.tc.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatal(err)
	}
	values := []string{"the team lunch is on friday", "the team offsite is in may", "the team standup is at nine",
		"the team retro is on thursday", "the team demo is on monday", "the team party is in december"}
	for i, v := range values {
		if _, err := w.tc.Set(ctx, ns, fmt.Sprintf("m%d", i), client.SetRequest{Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	served := map[string]int{}
	for _, q := range []string{"the team", "when is the team lunch", "the team", "team standup"} {
		ans, err := w.tc.Search(ctx, ns, client.SearchRequest{Query: q, TopK: len(values)})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range ans.Hits {
			served[h.MemoryKey]++
		}
	}
	if len(served) < 2 {
		t.Fatalf("the searches served %v; want several memories", served)
	}
	testenv.Eventually(t, 30*time.Second, "every served memory's recalls folded", func() bool {
		for key, n := range served {
			m, err := w.tc.Get(ctx, ns, key, client.Identity{}, time.Time{})
			if err != nil || m.RecallCount < n {
				return false
			}
		}
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_touches WHERE org = $1 AND namespace = $2`, org, ns) == 0
	})
	for i := range values {
		key := fmt.Sprintf("m%d", i)
		if m := get(t, w.tc, ns, key, client.Identity{}); m.RecallCount != served[key] {
			t.Errorf("%s: recall_count %d; the searches served it %d times", key, m.RecallCount, served[key])
		}
	}
	folds := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND op = 'memory.usage_fold'`, org, ns)
	commits := testenv.Int(t, pool, `SELECT count(DISTINCT committed_at) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND op = 'memory.usage_fold'`, org, ns)
	if folds != int64(len(served)) || commits >= folds {
		t.Fatalf("%d usage_fold revisions in %d commits for %d memories served; want one revision each, in fewer commits than memories", folds, commits, len(served))
	}
	// An amendment repeats its version's revision: the batched read of what each fold
	// amends must pair every memory with its own revision.
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions f WHERE f.org = $1 AND f.namespace = $2 AND f.op = 'memory.usage_fold'
		AND f.event_type IS DISTINCT FROM (SELECT w.event_type FROM loom.memory_revisions w WHERE w.org = f.org AND w.namespace = f.namespace
			AND w.memory_id = f.memory_id AND w.version = f.version AND w.op <> 'memory.usage_fold' ORDER BY w.seq LIMIT 1)`, org, ns); n != 0 {
		t.Fatalf("%d usage_fold revisions name another event type than the revision they amend", n)
	}
}
