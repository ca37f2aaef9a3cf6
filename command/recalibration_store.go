package command

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// KeepRecalibration is the worker API of the recalibration pass (workers/recalibration.go):
// it replaces a namespace's recorded search backgrounds for embedder with samples
// ([median, spread] pairs, query/calibrate.go's format) and stamps recalibrated_at. The
// backgrounds searches record afterwards are appended to these as before. Numbers
// only: no query, key or value.
//
// With them it records the conflict and duplicate thresholds the backgrounds' median
// gives the namespace (conflict_calibration.go), which memory.set reads.
func (s *Service) KeepRecalibration(ctx context.Context, org, ns, embedder string, samples [][2]float64, at time.Time) error {
	raw, err := json.Marshal(samples)
	if err != nil {
		return fmt.Errorf("encode the recalibrated backgrounds: %w", err)
	}
	var conflict, duplicate *float64
	if jc, ok := calibratedThresholds(samples, s.cfg.ConflictThreshold, s.cfg.DuplicateThreshold, s.cfg.ConflictCalibration); ok {
		conflict, duplicate = &jc.conflict, &jc.duplicate
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO loom.search_calibration AS c (org, namespace, embedder, samples, searches, updated_at, recalibrated_at,
			conflict_threshold, duplicate_threshold)
		VALUES ($1, $2, $3, $4::jsonb, 0, $5, $5, $6, $7)
		ON CONFLICT (org, namespace, embedder) DO UPDATE SET samples = EXCLUDED.samples, updated_at = $5, recalibrated_at = $5,
			conflict_threshold = $6, duplicate_threshold = $7`,
		org, ns, embedder, raw, at, conflict, duplicate); err != nil {
		return fmt.Errorf("keep the recalibrated backgrounds: %w", err)
	}
	s.ForgetJudgingCalibration(org, ns, embedder)
	return nil
}

// queueJudgingThresholds queues the read of a namespace's recorded thresholds on b;
// found gets them (nil when none are recorded) or the read's error.
func queueJudgingThresholds(b *pgx.Batch, org, ns, embedder string, found func(conflict, duplicate *float64, err error)) {
	b.Queue(`SELECT conflict_threshold, duplicate_threshold FROM loom.search_calibration
		WHERE org = $1 AND namespace = $2 AND embedder = $3`, org, ns, embedder).QueryRow(func(r pgx.Row) error {
		var conflict, duplicate *float64
		err := r.Scan(&conflict, &duplicate)
		found(conflict, duplicate, err)
		return nil
	})
}
