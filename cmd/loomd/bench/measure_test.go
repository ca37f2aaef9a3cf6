package bench

import (
	"testing"
	"time"
)

func TestPercentileIsNearestRank(t *testing.T) {
	var sorted []time.Duration
	for i := 1; i <= 200; i++ {
		sorted = append(sorted, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.50, 100 * time.Millisecond}, {0.99, 198 * time.Millisecond}, {1, 200 * time.Millisecond}} {
		if got := percentile(sorted, c.p); got != c.want {
			t.Errorf("p%.0f of 1..200 ms = %s, want %s", c.p*100, got, c.want)
		}
	}
	// Fewer than 100 values: p99 is the largest.
	if got := percentile(sorted[:10], 0.99); got != 10*time.Millisecond {
		t.Errorf("p99 of 10 values = %s, want the largest", got)
	}
	if s := summarize(nil, time.Second); s.Calls != 0 || s.P50MS != 0 {
		t.Errorf("summary of nothing: %+v", s)
	}
}

func TestScenarioListsKeepTheirOrder(t *testing.T) {
	got, err := ParseScenarios("parts, set")
	if err != nil || len(got) != 2 || got[0] != "set" || got[1] != "parts" {
		t.Fatalf("ParseScenarios(parts, set) = %v, %v", got, err)
	}
	if all, err := ParseScenarios("all"); err != nil || len(all) != len(Scenarios) {
		t.Fatalf("all = %v, %v", all, err)
	}
	if _, err := ParseScenarios("set,fly"); err == nil {
		t.Fatal("an unknown scenario was accepted")
	}
}

// A case's round trips per call count what the pool sent during the case, not its
// baseline that ran after it on the same pool.
func TestStoppedTripsMarkLeavesTheBaselineOut(t *testing.T) {
	trips := &RoundTrips{}
	trips.n.Add(7) // before the case
	mark := tripsMark{trips, trips.Count(), trips.Statements()}
	trips.n.Add(20) // the case: 10 calls, 2 each
	trips.statements.Add(30)
	mark = mark.stop()
	trips.n.Add(1000) // the baseline's SELECTs
	trips.statements.Add(1000)
	if got, statements := mark.per(10); got != 2 || statements != 3 {
		t.Errorf("round trips and statements per call %v, %v; want 2, 3", got, statements)
	}
}
