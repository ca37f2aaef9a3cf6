package command

import (
	"errors"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/httperr"
)

// The admission deadline counts re-checks, not the first round: a first round slowed
// by its stores (a peer read while ClickHouse recovers from a freeze) still gets its
// re-check, and only re-checking past LOOM_PG_ADMISSION_DEADLINE_MS answers 503
// ADMISSION_CONTENDED.
func TestAdmissionDeadlineCountsReChecks(t *testing.T) {
	for _, c := range []struct {
		name      string
		durations []time.Duration // how long each round takes; every round asks for another until the last
		wantRuns  int
		contended bool
	}{
		{"a slow first round is re-checked and commits", []time.Duration{10 * time.Second, time.Millisecond}, 2, false},
		{"fast re-checks within the deadline commit", []time.Duration{time.Millisecond, time.Second, time.Second}, 3, false},
		{"re-checking past the deadline is contention", []time.Duration{time.Millisecond, 2 * time.Second, 2 * time.Second, time.Millisecond}, 3, true},
		{"more rounds than the rounds setting is contention", []time.Duration{1, 1, 1, 1, 1, 1}, 4, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := time.Unix(1_700_000_000, 0)
			s := &Service{cfg: settings{Command: config.Command{AdmissionRounds: 4, AdmissionDeadline: 3 * time.Second}},
				now: func() time.Time { return clock }}
			runs := 0
			err := s.admitRounds(func(int64) (bool, int64, error) {
				clock = clock.Add(c.durations[runs])
				runs++
				return runs == len(c.durations), 0, nil
			})
			var he *httperr.Error
			if gotContended := errors.As(err, &he) && he.Code == httperr.CodeAdmissionContended; gotContended != c.contended || (!c.contended && err != nil) {
				t.Fatalf("err = %v, want contended %v", err, c.contended)
			}
			if runs != c.wantRuns {
				t.Fatalf("%d rounds ran, want %d", runs, c.wantRuns)
			}
		})
	}
}
