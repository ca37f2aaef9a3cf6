package command

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// KeepRecalibration is the worker API of the recalibration pass (workers/recalibration.go):
// it replaces a namespace's recorded search backgrounds for embedder with samples
// ([median, spread] pairs, query/calibrate.go's format) and stamps recalibrated_at. The
// backgrounds searches record afterwards are appended to these as before. Numbers
// only: no query, key or value.
func (s *Service) KeepRecalibration(ctx context.Context, org, ns, embedder string, samples [][2]float64, at time.Time) error {
	raw, err := json.Marshal(samples)
	if err != nil {
		return fmt.Errorf("encode the recalibrated backgrounds: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO loom.search_calibration AS c (org, namespace, embedder, samples, searches, updated_at, recalibrated_at)
		VALUES ($1, $2, $3, $4::jsonb, 0, $5, $5)
		ON CONFLICT (org, namespace, embedder) DO UPDATE SET samples = EXCLUDED.samples, updated_at = $5, recalibrated_at = $5`,
		org, ns, embedder, raw, at); err != nil {
		return fmt.Errorf("keep the recalibrated backgrounds: %w", err)
	}
	return nil
}
