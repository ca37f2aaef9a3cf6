package searchindex

import (
	"slices"
	"testing"
	"time"
)

// A namespace's filters keep their eligible sets between searches; a set must never
// serve a search it no longer describes: after a write, or once a row in it expires
// or ends its validity.
func TestEligibleSetsFollowWritesAndTheClock(t *testing.T) {
	x := New(Config{})
	expiring := rev(1, "trip.lisbon", "two tickets to lisbon in march", 1)
	soon := now.Add(90 * time.Second)
	expiring.ExpiresAt = &soon
	ending := rev(2, "trip.oslo", "two tickets to oslo in march", 1)
	later := now.Add(150 * time.Second)
	ending.ValidTo = &later
	apply(x, revRec(expiring), revRec(ending))

	at := func(when time.Time) []string {
		f := served()
		f.Now = when
		got := keysOf(search(t, x, f, "two tickets in march").Lexical)
		slices.Sort(got)
		return got
	}
	if got := at(now); !slices.Equal(got, []string{"trip.lisbon", "trip.oslo"}) {
		t.Fatalf("at the start: %v", got)
	}
	if got := at(now.Add(100 * time.Second)); !slices.Equal(got, []string{"trip.oslo"}) {
		t.Fatalf("past the expiry: %v, want trip.oslo alone", got)
	}
	if got := at(now.Add(200 * time.Second)); len(got) != 0 {
		t.Fatalf("past the validity too: %v, want nothing", got)
	}
	if got := at(now); !slices.Equal(got, []string{"trip.lisbon", "trip.oslo"}) {
		t.Fatalf("a search of an earlier clock: %v", got)
	}
	// An as_of before the validity's end still sees the row, judged at its own instant.
	f := served()
	f.Now, f.ValidAt = now.Add(200*time.Second), now
	if got := keysOf(search(t, x, f, "two tickets in march").Lexical); !slices.Equal(got, []string{"trip.oslo"}) {
		t.Fatalf("as_of within the validity: %v, want trip.oslo", got)
	}

	apply(x, revRec(rev(3, "trip.tokyo", "two tickets to tokyo in march", 1)))
	if got := at(now); !slices.Equal(got, []string{"trip.lisbon", "trip.oslo", "trip.tokyo"}) {
		t.Fatalf("after a write: %v", got)
	}
	del := rev(4, "trip.oslo", "", 2)
	del.Tombstone = true
	apply(x, revRec(del))
	if got := at(now); !slices.Equal(got, []string{"trip.lisbon", "trip.tokyo"}) {
		t.Fatalf("after a delete: %v", got)
	}
}
