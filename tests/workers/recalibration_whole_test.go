package workers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

// A namespace that more records made due than the pass's batch is recalibrated once
// for all of them: the pass takes the namespace whole, so none of its records is left
// owed until the interval's end (health's owed rows), and it is not claimed again, a
// batch at a time, by every pass of the interval.
func TestARecalibrationTakesEveryRecordThatMadeItsNamespaceDue(t *testing.T) {
	const org = "recalibration-whole"
	w := startRecalibration(t, org, 5, nil)
	model := w.model
	ctx, pool := context.Background(), env.PG(t)
	ns := testenv.Unique(t, "whole")
	if _, err := w.tc.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatal(err)
	}
	var entries []client.BulkEntry
	for i := 0; i < 40; i++ {
		entries = append(entries, client.BulkEntry{Key: fmt.Sprintf("note.%d", i), Value: fmt.Sprintf("note %d: the badge policy changed in week %d", i, i)})
	}
	for _, e := range entries { // a record each
		if _, err := w.tc.BulkSet(ctx, ns, client.BulkSetRequest{Entries: []client.BulkEntry{e}}); err != nil {
			t.Fatal(err)
		}
	}
	conn := env.CH(t)
	testenv.Eventually(t, 60*time.Second, "the namespace's vectors in ClickHouse", func() bool {
		n := testenv.CHStrings(t, conn, `SELECT toString(count()) FROM loom.memory_embeddings FINAL
			WHERE org = ? AND namespace = ? AND tombstone = 0 AND embedding_dim > 0 AND embedding_model = ?`, org, ns, model)
		return len(n) == 1 && n[0] == fmt.Sprint(len(entries))
	})
	w.recalibrate()
	items := func(state string) int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = 'recalibration' AND org = $1 AND namespace = $2
			AND state = $3`, org, ns, state)
	}
	testenv.Eventually(t, 2*time.Minute, "the namespace recalibrated", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.search_calibration WHERE org = $1 AND namespace = $2 AND embedder = $3
			AND recalibrated_at IS NOT NULL`, org, ns, model) == 1
	})
	// The feed queues a namespace's newest record of each polled batch (workers/due_passes.go,
	// newestByNamespace): between one item and one per record, and none left owed.
	testenv.Eventually(t, 30*time.Second, "every item done", func() bool {
		done := items("done")
		return items("owed") == 0 && done >= 1 && done <= int64(len(entries))
	})
}
