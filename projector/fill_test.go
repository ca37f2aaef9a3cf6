package projector

import (
	"math"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/config"
)

func TestPolledIsBehindWhileAFetchShowsMore(t *testing.T) {
	b := polled{lag: map[int32]int64{0: 0, 3: 0}}
	if b.behind() {
		t.Fatal("caught up on every partition, yet behind")
	}
	b.lag[2] = 7
	if !b.behind() {
		t.Fatal("7 records past the batch on partition 2, yet not behind")
	}
}

// A batch's backlog is every partition's records past it: a replay's is the topic's
// rest, which fills the batch, so it polls until full.
func TestPolledBacklogSumsThePartitions(t *testing.T) {
	b := polled{lag: map[int32]int64{0: 1200, 3: 0, 5: 4000}, fetched: map[int32]bool{0: true, 3: true, 5: true}}
	if got := b.backlog(); got != 5200 {
		t.Fatalf("backlog %d, want 5200", got)
	}
}

// A replay's tail batch starts with the few records of one partition, caught up there:
// the lags the batch before saw on the others keep it polling for theirs, and those no
// fetch brings before the wait runs out are forgotten.
func TestPolledStaysBehindOnTheLagsTheBatchBeforeSaw(t *testing.T) {
	b := polled{lag: map[int32]int64{1: 900, 4: 1100}, fetched: map[int32]bool{}}
	b.lag[2], b.fetched[2] = 0, true // this batch's first fetch: partition 2, caught up
	if !b.behind() {
		t.Fatal("partitions 1 and 4 held 2,000 records at the last batch, yet the batch is not behind")
	}
	if got := b.backlog(); got != 0 {
		t.Fatalf("backlog %d: an earlier batch's lag must not decide the long fill wait", got)
	}
	b.lag[1], b.fetched[1] = 0, true
	b.forgetUnfetched()
	if b.behind() {
		t.Fatalf("partition 4 brought nothing before the wait ran out, yet the batch is still behind: %v", b.lag)
	}
	if _, kept := b.lag[1]; !kept {
		t.Fatal("a partition fetched in this batch was forgotten")
	}
}

// A batch whose backlog would fill it (a replay) takes up to ReplayBatchRows, polling
// until it has them or the backlog is in; one nearly caught up waits the fill wait at
// most for BatchRows. ReplayBatchRows below BatchRows changes nothing.
func TestABatchFarBehindTakesTheReplaySize(t *testing.T) {
	cfg := settings{Projector: config.Projector{BatchRows: 5000, ReplayBatchRows: 20000}, FillWait: 250 * time.Millisecond}
	for _, c := range []struct {
		backlog int64
		inHand  int
		wait    time.Duration
		rows    int
	}{
		{backlog: 60000, inHand: 5000, wait: farFillWait, rows: 20000},
		{backlog: 4000, inHand: 1000, wait: farFillWait, rows: 20000},
		{backlog: 300, inHand: 1000, wait: 250 * time.Millisecond, rows: 5000},
	} {
		if wait, rows, _ := cfg.fill(c.backlog, c.inHand); wait != c.wait || rows != c.rows {
			t.Errorf("backlog %d past %d in hand: wait %s for %d rows, want %s for %d", c.backlog, c.inHand, wait, rows, c.wait, c.rows)
		}
	}
	cfg.ReplayBatchRows = 100
	if _, rows, _ := cfg.fill(60000, 5000); rows != 5000 {
		t.Errorf("a replay size below the batch size gave batches of %d", rows)
	}
}

// A batch far behind stops at ReplayBatchBytes of records as well (0: no bound); one
// nearly caught up is bounded by BatchRows alone.
func TestABatchFarBehindIsBoundedByItsBytes(t *testing.T) {
	cfg := settings{Projector: config.Projector{BatchRows: 5000, ReplayBatchRows: 10000, ReplayBatchBytes: 96 << 20}, FillWait: 250 * time.Millisecond}
	if _, _, bytes := cfg.fill(60000, 5000); bytes != 96<<20 {
		t.Errorf("far behind: bounded at %d bytes, want %d", bytes, 96<<20)
	}
	if _, _, bytes := cfg.fill(300, 1000); bytes != math.MaxInt64 {
		t.Errorf("nearly caught up: bounded at %d bytes, want no bound", bytes)
	}
	cfg.ReplayBatchBytes = 0
	if _, _, bytes := cfg.fill(60000, 5000); bytes != math.MaxInt64 {
		t.Errorf("ReplayBatchBytes 0: bounded at %d bytes, want no bound", bytes)
	}
}
