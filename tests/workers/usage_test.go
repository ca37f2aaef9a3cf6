package workers

import (
	"context"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// memory.touch records a use; the command role publishes it in the namespace's
// memory.usage_recorded record, the usage fold adds it to the row's
// reinforcement_count (as an amendment: the version a writer read stays the head's),
// and search's prior lifts the touched row above an equally relevant one. A touch is
// folded once: three touches, whatever records carry them and passes fold them, make a
// reinforcement of three.
func TestTouchMovesAMemoryUpAmongEquals(t *testing.T) {
	const org = "usagefold"
	w := startWorkers(t, org, nil, foldingUsage)
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "usage")
	if _, err := w.tc.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatal(err)
	}
	const value = "the team lunch is on friday at noon"
	var versions = map[string]string{}
	for _, key := range []string{"n1", "n2"} {
		a, err := w.tc.Set(ctx, ns, key, client.SetRequest{Value: value})
		if err != nil {
			t.Fatal(err)
		}
		versions[key] = a.VersionText
	}
	order := func() []string {
		t.Helper()
		ans, err := w.tc.Search(ctx, ns, client.SearchRequest{Query: "when is the team lunch", TopK: 5})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, h := range ans.Hits {
			keys = append(keys, h.MemoryKey)
		}
		return keys
	}
	before := order()
	if len(before) != 2 {
		t.Fatalf("before any touch: %v, want both memories", before)
	}
	// Equal scores: the identity breaks the tie. Touch the one that came second.
	touched := before[1]
	for i := 0; i < 3; i++ {
		if a, err := w.tc.Touch(ctx, ns, touched, client.Identity{}); err != nil || !a.Touched {
			t.Fatalf("touch: %+v, %v", a, err)
		}
	}
	if _, err := w.tc.Touch(ctx, ns, "absent", client.Identity{}); !isCode(err, client.CodeNotFound) {
		t.Fatalf("touching a key with no memory: %v, want 404", err)
	}
	testenv.Eventually(t, 30*time.Second, "the touches published and folded", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_touches WHERE org = $1`, org) == 0 &&
			testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = 'usage_fold' AND org = $1 AND state = 'owed'`, org) == 0 &&
			testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = 'usage_fold' AND org = $1 AND outcome = 'folded'`, org) > 0
	})
	// The fold's items come from the usage records through the workers' feed, so the
	// last publication's item may not be owed yet when the first is folded: read until
	// all three touches are in, to the same deadline.
	var m *client.Memory
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if m, err = w.tc.Get(ctx, ns, touched, client.Identity{}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if m.ReinforcementCount >= 3 || time.Now().After(deadline) {
			break
		}
	}
	if m.ReinforcementCount != 3 || m.VersionText != versions[touched] {
		t.Fatalf("%s after three touches: reinforcement %d, version %s; want 3 and its version %s kept", touched, m.ReinforcementCount, m.VersionText, versions[touched])
	}
	testenv.Eventually(t, 30*time.Second, "the touched memory first", func() bool {
		got := order()
		return len(got) == 2 && got[0] == touched
	})
	// The touches went out as usage records (ids and counts only), and the fold wrote
	// as itself.
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.generation_records WHERE org = $1 AND namespace = $2
		AND event_type = 'memory.usage_recorded'`, org, ns); n < 1 {
		t.Fatal("no memory.usage_recorded record kept for the namespace")
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND op = 'memory.usage_fold'
		AND audit->>'actor' = 'worker:usage_fold'`, org, ns); n < 1 {
		t.Fatal("no memory.usage_fold revision written as worker:usage_fold")
	}
}

// Evidence events are folded into the row's evidence_count: a restatement of a
// memory and a write merged into it (the same value under another key) count one
// each; a dry run counts nothing. The restatement also reinforces the row, the merge
// does not. The count reaches ClickHouse through the topic.
func TestEvidenceEventsAreFoldedIntoEvidenceCount(t *testing.T) {
	const org = "evidencefold"
	w := startWorkers(t, org, nil, foldingUsage)
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "evidence")
	const value = "the user lives in Lisbon"
	first, err := w.tc.Set(ctx, ns, "home", client.SetRequest{Value: value})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		key     string
		dryRun  bool
		verdict string
	}{{"home", false, "restatement"}, {"residence", false, "merge"}, {"residence", true, "merge"}} {
		a, err := w.tc.Set(ctx, ns, step.key, client.SetRequest{Value: value, DryRun: step.dryRun})
		if err != nil || a.Verdict != step.verdict || a.DryRun != step.dryRun {
			t.Fatalf("%s (dry run %t): %+v, %v; want %s, marked dry_run as asked", step.key, step.dryRun, a, err, step.verdict)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the evidence counted and folded", func() bool {
		m, err := w.tc.Get(ctx, ns, "home", client.Identity{}, time.Time{})
		return err == nil && m.EvidenceCount >= 2 &&
			testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_touches WHERE org = $1`, org) == 0
	})
	m, err := w.tc.Get(ctx, ns, "home", client.Identity{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if m.EvidenceCount != 2 || m.ReinforcementCount != 1 || m.MemoryID != first.MemoryID {
		t.Fatalf("home: evidence %d, reinforcement %d; want 2 (a restatement, a merge) and 1 (the restatement)", m.EvidenceCount, m.ReinforcementCount)
	}
	// The topic carries the folded count and ClickHouse keeps it: the history read
	// behind the barrier (memory.get ?as_of, memory_versions) answers it as the head does.
	past, err := w.tc.Get(ctx, ns, "home", client.Identity{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if past.EvidenceCount != 2 || past.VersionText != m.VersionText {
		t.Fatalf("home as of now: evidence_count %d at version %s; want 2 at %s", past.EvidenceCount, past.VersionText, m.VersionText)
	}
}

// A usage record is folded once. The fold's items are the records' stamps (one per
// memory a record counts, keyed by the record's seq): a replay of the fold's group over
// the test's records, as a redelivery would, queues them again, finds them done and
// folds nothing, so the touches still count once and no revision is written.
func TestAReplayOfUsageRecordsFoldsNothingTwice(t *testing.T) {
	const org = "usagereplay"
	w := startWorkers(t, org, nil, foldingUsage)
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "replay")
	start := time.Now().UTC()
	set(t, w.tc, ns, "lunch", "the team lunch is on friday at noon", client.Identity{})
	reinforcement := func() int { return get(t, w.tc, ns, "lunch", client.Identity{}).ReinforcementCount }
	// Two records at least: the second touch waits for the first's fold.
	for want := 1; want <= 2; want++ {
		if _, err := w.tc.Touch(ctx, ns, "lunch", client.Identity{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "the touch folded", func() bool { return reinforcement() == want })
	}
	drained(t, pool, "usage_fold", org)
	count := func(sql string) int64 { return testenv.Int(t, pool, sql, org, ns) }
	const recordsSQL = `SELECT count(*) FROM loom.generation_records WHERE org = $1 AND namespace = $2 AND event_type = 'memory.usage_recorded'`
	const foldsSQL = `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND op = 'memory.usage_fold'`
	const itemsSQL = `SELECT count(*) FROM loom.worker_items WHERE worker = 'usage_fold' AND org = $1 AND namespace = $2`
	records, folds, items := count(recordsSQL), count(foldsSQL), count(itemsSQL)
	if records < 2 || folds < 2 || items != records {
		t.Fatalf("usage records %d, fold revisions %d, items %d; want two records at least, an item each, each folded", records, folds, items)
	}

	w.stop()
	resetGroup(t, "usage_fold", start.Format(time.RFC3339Nano))
	w.serve()
	drained(t, pool, "usage_fold", org)
	if got := reinforcement(); got != 2 || count(foldsSQL) != folds || count(itemsSQL) != items {
		t.Fatalf("after the replay: reinforcement %d, fold revisions %d, items %d; want 2, %d and %d: a record was folded twice",
			got, count(foldsSQL), count(itemsSQL), folds, items)
	}
}

// foldingUsage has the command role publish the usage it counts and the usage fold
// fold it, each every 100 ms (the test env publishes none: a usage record takes a seq),
// search recalls among it.
func foldingUsage(c *config.Config) {
	c.Workers.UsageFold.Enabled, c.Workers.UsageFold.Interval = true, 100*time.Millisecond
	c.Command.UsagePublishInterval = 100 * time.Millisecond
	c.Command.RecallPublishInterval = 100 * time.Millisecond
}

// A publication that finds nothing to publish leaves the namespace's seqs as they were:
// a seq drawn and committed without its record is a gap the projection's watermark
// waits at for ever, and every read of the namespace that waits for ClickHouse is then
// PROJECTION_BEHIND. Two command processes publishing one namespace took that path (the
// second found the counts taken); so does a row of counts that counts nothing.
func TestAPublicationWithNothingToPublishLeavesNoGapInTheSeqs(t *testing.T) {
	const org = "usage-gap"
	w := startWorkers(t, org, nil, foldingUsage)
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "usage-gap")
	first, err := w.tc.Set(ctx, ns, "first", client.SetRequest{Value: "the first fact of the namespace"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO loom.memory_touches (org, namespace, memory_id, touches) VALUES ($1, $2, $3, 0)`,
		org, ns, first.MemoryID); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the publisher takes the empty count", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_touches WHERE org = $1 AND namespace = $2`, org, ns) == 0
	})
	if _, err := w.tc.Set(ctx, ns, "second", client.SetRequest{Value: "a second fact written after the publication"}); err != nil {
		t.Fatal(err)
	}
	list, err := w.tc.List(ctx, ns, client.ListOptions{Order: "key"})
	if err != nil || len(list.Memories) != 2 {
		t.Fatalf("list after the publication: %v (%+v); want both memories", err, list)
	}
}

// A memory's count held locked (as a recall flush holds the rows it upserts) does not
// hold up the rest of its namespace's usage: the publication takes the other counts and
// leaves that one for its next round. It waited for the row under the namespace's
// generation lock, and a flush upserting in another order deadlocked with it.
func TestACountHeldLockedLeavesTheNamespacesOtherUsagePublished(t *testing.T) {
	const org = "usageheld"
	w := startWorkers(t, org, nil, func(c *config.Config) {
		foldingUsage(c)
		c.Command.UsagePublishInterval = time.Second
	})
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "held")
	if _, err := w.tc.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, key := range []string{"held", "free"} {
		a, err := w.tc.Set(ctx, ns, key, client.SetRequest{Value: "the " + key + " memory"})
		if err != nil {
			t.Fatal(err)
		}
		ids[key] = a.MemoryID
	}
	reinforcement := func(key string) int {
		m, err := w.tc.Get(ctx, ns, key, client.Identity{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return m.ReinforcementCount
	}
	// The held memory is counted first (the publication takes the oldest counts first),
	// then the free one; the held one's row is locked before a publication takes it
	// (tried again should one have come between).
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for attempt := 0; ; attempt++ {
		for _, key := range []string{"held", "free"} {
			if a, err := w.tc.Touch(ctx, ns, key, client.Identity{}); err != nil || !a.Touched {
				t.Fatalf("touch %s: %+v, %v", key, a, err)
			}
		}
		tag, err := tx.Exec(ctx, `UPDATE loom.memory_touches SET last_at = now() WHERE org = $1 AND namespace = $2 AND memory_id = $3`,
			org, ns, ids["held"])
		if err != nil {
			t.Fatal(err)
		}
		if tag.RowsAffected() == 1 {
			break
		}
		if attempt == 3 {
			t.Fatal("a publication took the held memory's count before the test could lock it, four times")
		}
	}
	testenv.Eventually(t, 20*time.Second, "the free memory's use folded while the held one's row is locked", func() bool {
		return reinforcement("free") >= 1
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the held memory's use folded once its row is free", func() bool {
		return reinforcement("held") >= 1
	})
}
