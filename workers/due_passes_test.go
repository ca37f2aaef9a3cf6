package workers

import (
	"testing"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/revisions"
)

// A feed's batch of revisions queues one recalibration item per namespace, its newest
// record's, not one per record: the pass recalibrates a namespace once for all of them,
// so the rest were a queue row, a claim and a stamp per write for nothing. The newest
// record's item is the one kept, so the namespace is due up to the batch's last seq.
func TestABatchQueuesOneRecalibrationItemPerNamespace(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s := &Service{now: func() time.Time { return now }}
	s.cfg.Recalibration = config.Pass{MaxAge: 24 * time.Hour}
	var batch []revisions.Record
	for i, ns := range []string{"a", "b", "a", "a", "b", "c"} {
		env := &events.Envelope{Org: "acme", Namespace: ns, Seq: int64(10 + i), CommittedAt: now.Add(-time.Minute)}
		batch = append(batch, revisions.Record{Env: env, Kind: revisions.Revision})
	}
	items := s.pickDue(workerRecalibration, batch)
	got := map[string]int64{}
	for _, it := range items {
		if _, twice := got[it.namespace]; twice {
			t.Fatalf("namespace %s queued more than one item: %+v", it.namespace, items)
		}
		got[it.namespace] = it.seq
	}
	want := map[string]int64{"a": 13, "b": 14, "c": 15}
	if len(got) != len(want) {
		t.Fatalf("items for %v, want one for each of %v", got, want)
	}
	for ns, seq := range want {
		if got[ns] != seq {
			t.Fatalf("namespace %s queued seq %d, want its newest, %d (items %v)", ns, got[ns], seq, got)
		}
	}
}
