package projector

import (
	"testing"
	"time"
)

func TestPacerLetsABurstThroughThenHoldsTheRate(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := newPacer(250*time.Millisecond, 0, t0)
	// A second's worth of batches may start at once.
	for i := 0; i < 4; i++ {
		if d := p.delay(t0); d != 0 {
			t.Fatalf("batch %d of the burst delayed %s", i, d)
		}
		p.take(t0)
	}
	if d := p.delay(t0); d != 250*time.Millisecond {
		t.Fatalf("fifth batch at once: delay %s, want one interval", d)
	}
	// Under steady load, one batch per interval.
	now := t0.Add(250 * time.Millisecond)
	if d := p.delay(now); d != 0 {
		t.Fatalf("after an interval: delay %s", d)
	}
	p.take(now)
	if d := p.delay(now.Add(100 * time.Millisecond)); d != 150*time.Millisecond {
		t.Fatalf("mid-interval delay %s, want 150ms", d)
	}
	// Idle time refills at most a second's worth.
	later := now.Add(time.Hour)
	for i := 0; i < 4; i++ {
		if p.delay(later) != 0 {
			t.Fatalf("batch %d after idling delayed", i)
		}
		p.take(later)
	}
	if p.delay(later) == 0 {
		t.Fatal("idling saved more than a second's worth of batches")
	}
}

func TestPacerWithoutIntervalNeverWaits(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := newPacer(0, time.Second, t0)
	for i := 0; i < 100; i++ {
		if p.delay(t0) != 0 {
			t.Fatal("a zero interval delayed a batch")
		}
		p.take(t0)
	}
}

// stretchedPacer is a pacer of a 250 ms interval and a 1 s busy one that spent its
// burst and stretched: its fifth batch waited an interval, busy and not full.
func stretchedPacer(t *testing.T) (*pacer, time.Time) {
	t.Helper()
	t0 := time.Unix(0, 0)
	p := newPacer(250*time.Millisecond, time.Second, t0)
	for i := 0; i < 4; i++ {
		p.take(t0)
		p.batched(t0, false, time.Second, false)
	}
	now := t0.Add(p.delay(t0))
	p.take(now)
	p.batched(now, true, 0, false)
	if d := p.delay(now); d != time.Second {
		t.Fatalf("stretched: delay %s, want the busy interval", d)
	}
	return p, now
}

func TestPacerStretchesWhileTheTopicKeepsItBusyAndTheBatchesAreNotFull(t *testing.T) {
	p, now := stretchedPacer(t)
	// A batch whose first record the poll waited 50 ms for (not held, nothing waiting)
	// keeps the stretch: the topic did not pause.
	now = now.Add(time.Second)
	p.take(now)
	p.batched(now, false, 50*time.Millisecond, false)
	if d := p.delay(now); d != time.Second {
		t.Fatalf("after a short wait for a record: delay %s, want the busy interval", d)
	}
	// Nor does a wait of 300 ms, more than an interval and less than the busy one.
	now = now.Add(time.Second)
	p.take(now)
	p.batched(now, false, 300*time.Millisecond, false)
	if d := p.delay(now); d != time.Second {
		t.Fatalf("after a 300 ms wait for a record: delay %s, want the busy interval", d)
	}
	// A full batch (a backlog) goes back to the interval's pace.
	now = now.Add(time.Second)
	p.take(now)
	p.batched(now, true, 0, true)
	if d := p.delay(now); d != 250*time.Millisecond {
		t.Fatalf("after a full batch: delay %s, want one interval", d)
	}
	// Stretched again, then a pause long enough to save a token: the next batch starts
	// at once and the pace is the interval's again.
	now = now.Add(250 * time.Millisecond)
	p.take(now)
	p.batched(now, true, 0, false)
	now = now.Add(time.Second)
	if d := p.delay(now); d != 0 {
		t.Fatalf("after a pause of the busy interval: delay %s", d)
	}
	p.take(now)
	p.batched(now, false, time.Second, false)
	if d := p.delay(now.Add(100 * time.Millisecond)); d != 150*time.Millisecond {
		t.Fatalf("after an unheld batch: delay %s, want the rest of one interval", d)
	}
}

func TestPacerWithABusyIntervalAtMostItsOwnNeverStretches(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := newPacer(250*time.Millisecond, 0, t0)
	for i := 0; i < 4; i++ {
		p.take(t0)
	}
	p.take(t0.Add(250 * time.Millisecond))
	p.batched(t0.Add(250*time.Millisecond), true, 0, false)
	if d := p.delay(t0.Add(250 * time.Millisecond)); d != 250*time.Millisecond {
		t.Fatalf("a busy interval of 0 stretched the pace: delay %s", d)
	}
}

// A read waiting for the projection ends a stretch: its batch comes at the interval's
// pace, as before the stretch existed, and never sooner.
func TestPacerAWaitingReadEndsTheStretchButNotThePace(t *testing.T) {
	p, now := stretchedPacer(t)
	p.hurry(now)
	if d := p.delay(now); d != 250*time.Millisecond {
		t.Fatalf("a read waits: delay %s, want one interval", d)
	}
	p.take(now.Add(250 * time.Millisecond))
	p.hurry(now.Add(250 * time.Millisecond))
	if d := p.delay(now.Add(250 * time.Millisecond)); d != 250*time.Millisecond {
		t.Fatalf("a read waits right after a batch: delay %s, want one interval", d)
	}
}

// A steady load that starts on an idle projection stretches the pace at its second
// batch: the third waits the busy interval, not the second's worth of batches saved
// up for a write now and then (four tiny parts per table in the load's first second).
func TestPacerGivesUpItsSavedBatchesWhenASteadyLoadStretchesIt(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := newPacer(250*time.Millisecond, time.Second, t0)
	p.take(t0)
	p.batched(t0, false, time.Second, false) // the load's first write: the poll waited for it
	now := t0.Add(50 * time.Millisecond)
	if d := p.delay(now); d != 0 {
		t.Fatalf("second batch: delay %s, want none (a token saved)", d)
	}
	p.take(now)
	p.batched(now, false, 0, false) // records were waiting: the load is steady
	if d := p.delay(now); d != time.Second {
		t.Fatalf("third batch of a steady load: delay %s, want the busy interval", d)
	}
	// A pause of the busy interval ends the stretch and saves a token: a lone write
	// after it goes at once.
	now = now.Add(time.Second)
	if d := p.delay(now); d != 0 {
		t.Fatalf("a write after a pause of the busy interval: delay %s", d)
	}
}
