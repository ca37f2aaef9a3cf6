package outbox

import "testing"

func TestACommitNotifiesOnlyWhenNoRelayOfThisProcessHoldsTheLock(t *testing.T) {
	w := NewWaker(nil, nil)
	woken, holding := 0, false
	remove := w.WakeLocal(func() bool { woken++; return holding })
	notifies := func() bool {
		select {
		case <-w.poke:
			return true
		default:
			return false
		}
	}
	w.Queued()
	if woken != 1 || !notifies() {
		t.Fatalf("a relay of this process standing by: woken %d times; want it woken and a NOTIFY for the relay that holds the lock elsewhere", woken)
	}
	holding = true
	w.Queued()
	if woken != 2 || notifies() {
		t.Fatalf("a relay of this process holding the lock: woken %d; want it woken and no NOTIFY", woken)
	}
	remove()
	w.Queued()
	if woken != 2 || !notifies() {
		t.Fatalf("after the relay stopped: woken %d; want a NOTIFY alone", woken)
	}
}
