package command

import (
	"errors"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/ttlcache"
)

// The embedder calibration of memory.set's thresholds (memory-architecture, memory.set
// step 10: the type's dedup_threshold, else the namespace's conflict_threshold, else the
// embedder calibration, else LOOM_CONFLICT_THRESHOLD; "Background passes":
// recalibration writes calibration thresholds). The recalibration pass measures a
// namespace's background (the cosines its rows give one another past the nearest,
// internal/scorebg) and KeepRecalibration records, beside it, the thresholds its median
// gives: a namespace whose rows all look alike (a high background) needs a closer peer
// to call it the same fact, one whose rows are far apart a less close one. A threshold
// keeps its place between the background and an identical value:
// t + (m - baseline)(1 - t)/(1 - baseline), moved at most LOOM_CONFLICT_CALIBRATION_MAX_SHIFT.
// memory.set reads the recorded pair (cached per process, calibrationTTL) unless
// LOOM_CONFLICT_CALIBRATION_ENABLED is off.

// judgingCalibrationTTL is how long a process reuses a namespace's recorded thresholds.
const judgingCalibrationTTL = time.Minute

// judgingCalibration is a namespace's recorded pair of thresholds; ok is false when
// the pass has recorded none.
type judgingCalibration struct {
	conflict, duplicate float64
	ok                  bool
}

type judgingKey struct{ org, namespace, embedder string }

type judgingCalibrations = ttlcache.Cache[judgingKey, judgingCalibration]

func newJudgingCalibrations() *judgingCalibrations {
	return ttlcache.New[judgingKey, judgingCalibration](4096, judgingCalibrationTTL)
}

// calibratedThreshold moves threshold t by where the namespace's background median
// sits from the baseline, keeping its place between the background and 1, bounded.
func calibratedThreshold(t, median float64, c config.ConflictCalibration) float64 {
	shift := (median - c.Baseline) * (1 - t) / (1 - c.Baseline)
	shift = math.Max(-c.MaxShift, math.Min(c.MaxShift, shift))
	return math.Round(math.Min(1, math.Max(0.01, t+shift))*1e4) / 1e4
}

// calibratedThresholds are the conflict and duplicate thresholds of a namespace whose
// probes' backgrounds are samples ([median, spread]); ok is false with none.
func calibratedThresholds(samples [][2]float64, conflict, duplicate float64, c config.ConflictCalibration) (judgingCalibration, bool) {
	if len(samples) == 0 {
		return judgingCalibration{}, false
	}
	med := make([]float64, len(samples))
	for i, s := range samples {
		med[i] = s[0]
	}
	sort.Float64s(med)
	m := med[len(med)/2]
	jc := judgingCalibration{conflict: calibratedThreshold(conflict, m, c), duplicate: calibratedThreshold(duplicate, m, c), ok: true}
	jc.duplicate = math.Max(jc.duplicate, jc.conflict)
	return jc, true
}

// queueJudgingCalibration queues the read of a namespace's recorded thresholds on b
// when the process holds none for it, so a write's round brings them in its one round
// trip; rounds read them from the cache (judgingOf).
func (s *Service) queueJudgingCalibration(b *pgx.Batch, org, ns string) {
	if !s.cfg.ConflictCalibration.Enabled || s.embedder == nil {
		return
	}
	k := judgingKey{org, ns, s.embedder.Model()}
	if _, ok := s.judging.Get(k); ok {
		return
	}
	// The cache outlives the request: its key owns its strings. A namespace may be a
	// view of a request's buffer, which the next request overwrites (fiber's values
	// unless the app runs Immutable, as loomd's does since): a key holding it changed
	// under the map, and at 32 namespaces 0.17–0.20 writes in each read the thresholds again.
	k = judgingKey{strings.Clone(org), strings.Clone(ns), k.embedder}
	queueJudgingThresholds(b, org, ns, k.embedder, func(conflict, duplicate *float64, err error) {
		jc := judgingCalibration{}
		switch {
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return // advice, never a reason to fail: the next round reads it again
		case conflict != nil && duplicate != nil:
			jc = judgingCalibration{conflict: *conflict, duplicate: *duplicate, ok: true}
		}
		s.judging.Add(k, jc)
	})
}

// judgingHeld reports whether a round needs no read of a namespace's thresholds: the
// process holds them, or judges without them.
func (s *Service) judgingHeld(org, ns string) bool {
	if !s.cfg.ConflictCalibration.Enabled || s.embedder == nil {
		return true
	}
	_, ok := s.judging.Get(judgingKey{org, ns, s.embedder.Model()})
	return ok
}

// judgingOf is a namespace's recorded thresholds as the process holds them.
func (s *Service) judgingOf(org, ns string) judgingCalibration {
	if !s.cfg.ConflictCalibration.Enabled || s.embedder == nil {
		return judgingCalibration{}
	}
	jc, _ := s.judging.Get(judgingKey{org, ns, s.embedder.Model()})
	return jc
}

// ForgetJudgingCalibration drops a namespace's cached thresholds: the recalibration
// pass recorded new ones (workers.Service.OnRecalibrated).
func (s *Service) ForgetJudgingCalibration(org, ns, embedder string) {
	s.judging.Remove(judgingKey{org, ns, embedder})
}
