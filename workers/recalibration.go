package workers

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/scorebg"
)

// The recalibration pass (memory-architecture, "Background passes", recalibration: the
// embedder's score distribution in, calibration thresholds out; on by default,
// LOOM_RECALIBRATION_ENABLED): a paced loop, no model, that rewrites each namespace's
// search background in loom.search_calibration, the one the calibrated gates borrow
// when a search's own pool is too small to hold one (query/calibrate.go). Searches
// record their pools' backgrounds as they run, so a namespace searched only through
// narrow filters has none, and one whose content has changed keeps up to 128 old ones.
// The pass measures the background from the namespace's vectors as the embedder scores
// them now: each probe (the rows its usage, recall_count and reinforcement_count, says
// searches find most, then a hash sample) is a query whose answer is itself, and the
// sampled rows' cosines to it, ranked, give one background (internal/scorebg, the
// statistic search reads its pools with). The probes' backgrounds replace the
// namespace's recorded ones (command.KeepRecalibration), stamped; the searches after
// it append theirs. A pass takes up to LOOM_RECALIBRATION_BATCH namespaces with enough
// vectors of the running embedder, never recalibrated or longest ago first, none twice
// within LOOM_RECALIBRATION_INTERVAL_MS. Its stamp is recalibrated_at: a pass killed
// midway leaves each namespace's backgrounds as they were or replaced whole.

const workerRecalibration = "recalibration"

const (
	// recalibrationSample bounds the vectors read per namespace; recalibrationProbes is
	// how many of them are probes (backgrounds written).
	recalibrationSample = 400
	recalibrationProbes = 32
)

// RunRecalibration runs the recalibration pass until ctx ends.
func (s *Service) RunRecalibration(ctx context.Context) {
	s.runPasses(ctx, workerRecalibration, s.cfg.Recalibration.Interval, 0, s.recalibrationPass)
}

// OnRecalibrated is called after a namespace's backgrounds are rewritten: a process
// that also serves search drops its cached calibration (query.Service.ForgetCalibration).
func (s *Service) OnRecalibrated(f func(org, namespace, embedder string)) { s.recalibrated = f }

// recalibrationPass recalibrates the namespaces due.
func (s *Service) recalibrationPass(ctx context.Context) passResult {
	if s.ch == nil {
		return passResult{errors: 1, stopped: true}
	}
	model := s.embedder.Model()
	due, err := s.recalibrationDue(ctx, model)
	return s.eachDueNamespace(ctx, "recalibration", due, err, "backgrounds", func(org, namespace string) error {
		return s.recalibrate(ctx, org, namespace, model)
	})
}

// recalibrationDue lists the namespaces holding enough vectors of model for a
// background, not recalibrated within the pass's interval, the ones never
// recalibrated or recalibrated longest ago first, up to the pass's batch.
func (s *Service) recalibrationDue(ctx context.Context, model string) ([][2]string, error) {
	var all [][2]string
	err := s.ch.Each(s.ch.Ctx(ctx), `SELECT org, namespace FROM `+ch.Database+`.memory_embeddings FINAL
		WHERE tombstone = 0 AND embedding_dim > 0 AND embedding_model = ?
		GROUP BY org, namespace HAVING count() >= ?`, []any{model, uint64(scorebg.From + scorebg.Min)},
		func(scan func(...any) error) error {
			var k [2]string
			if err := scan(&k[0], &k[1]); err != nil {
				return err
			}
			all = append(all, k)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("list the namespaces with vectors: %w", err)
	}
	stamped := map[[2]string]time.Time{}
	rows, err := s.pool.Query(ctx, `SELECT org, namespace, recalibrated_at FROM loom.search_calibration
		WHERE embedder = $1 AND recalibrated_at IS NOT NULL`, model)
	if err != nil {
		return nil, fmt.Errorf("read the recalibration stamps: %w", err)
	}
	for rows.Next() {
		var k [2]string
		var at time.Time
		if err := rows.Scan(&k[0], &k[1], &at); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the recalibration stamps: %w", err)
		}
		stamped[k] = at
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the recalibration stamps: %w", err)
	}
	cutoff := s.now().Add(-s.cfg.Recalibration.Interval)
	all = slices.DeleteFunc(all, func(k [2]string) bool { at, ok := stamped[k]; return ok && at.After(cutoff) })
	slices.SortFunc(all, func(a, b [2]string) int {
		if c := stamped[a].Compare(stamped[b]); c != 0 {
			return c
		}
		return slices.Compare(a[:], b[:])
	})
	if len(all) > s.cfg.Recalibration.Batch {
		all = all[:s.cfg.Recalibration.Batch]
	}
	return all, nil
}

// recalibrate measures one namespace's backgrounds and keeps them.
func (s *Service) recalibrate(ctx context.Context, org, ns, model string) error {
	ids, vecs, err := s.recalibrationSample(ctx, org, ns, model)
	if err != nil {
		return err
	}
	used, err := s.mostUsed(ctx, org, ns)
	if err != nil {
		return err
	}
	var samples [][2]float64
	for _, p := range probeOrder(ids, used) {
		scores := make([]float64, len(vecs))
		for i, v := range vecs {
			scores[i] = cosine(vecs[p], v)
		}
		if median, spread, _, ok := scorebg.Of(scores); ok {
			samples = append(samples, [2]float64{round6(median), round6(spread)})
		}
	}
	if len(samples) == 0 {
		return nil // too few comparable vectors: the recorded backgrounds stand
	}
	if err := s.cmd.KeepRecalibration(ctx, org, ns, model, samples, s.now()); err != nil {
		return err
	}
	if s.recalibrated != nil {
		s.recalibrated(org, ns, model)
	}
	return nil
}

// recalibrationSample reads up to recalibrationSample of the namespace's served
// vectors of model, in a hash order.
func (s *Service) recalibrationSample(ctx context.Context, org, ns, model string) ([]string, [][]float32, error) {
	var ids []string
	var vecs [][]float32
	err := s.ch.Each(s.ch.Ctx(ctx), `SELECT toString(memory_id), embedding FROM `+ch.Database+`.memory_embeddings FINAL
		PREWHERE org = ? AND namespace = ?
		WHERE tombstone = 0 AND embedding_dim > 0 AND embedding_model = ? AND status IN ('active', 'conflicted') AND sensitivity != 'high'
		ORDER BY cityHash64(agent, user_id, session_id, memory_key)
		LIMIT ?`, []any{org, ns, model, uint64(recalibrationSample)}, func(scan func(...any) error) error {
		var id string
		var v []float32
		if err := scan(&id, &v); err != nil {
			return err
		}
		ids, vecs = append(ids, id), append(vecs, v)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read the namespace's vectors: %w", err)
	}
	return ids, vecs, nil
}

// mostUsed lists the namespace's memories its usage names most (recall_count, then
// reinforcement_count, as the usage fold folded them), up to recalibrationProbes.
func (s *Service) mostUsed(ctx context.Context, org, ns string) ([]string, error) {
	var out []string
	err := s.ch.Each(s.ch.Ctx(ctx), `SELECT toString(memory_id) FROM `+ch.Database+`.memory FINAL
		PREWHERE org = ? AND namespace = ?
		WHERE tombstone = 0 AND recall_count + reinforcement_count > 0
		ORDER BY recall_count + reinforcement_count DESC, memory_id
		LIMIT ?`, []any{org, ns, uint64(recalibrationProbes)}, func(scan func(...any) error) error {
		var id string
		if err := scan(&id); err != nil {
			return err
		}
		out = append(out, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the namespace's usage: %w", err)
	}
	return out, nil
}

// probeOrder is the indexes of the sample's probes: the used rows it holds, most used
// first, then the rest in the sample's order, up to recalibrationProbes.
func probeOrder(ids []string, used []string) []int {
	at := make(map[string]int, len(ids))
	for i, id := range ids {
		at[id] = i
	}
	var out []int
	taken := map[int]bool{}
	for _, id := range used {
		if i, ok := at[id]; ok && !taken[i] {
			out, taken[i] = append(out, i), true
		}
	}
	for i := range ids {
		if len(out) >= recalibrationProbes {
			break
		}
		if !taken[i] {
			out, taken[i] = append(out, i), true
		}
	}
	return out[:min(len(out), recalibrationProbes)]
}

// cosine of two vectors (0 when they cannot be compared).
func cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	na, nb := math.Sqrt(embed.Dot(a, a)), math.Sqrt(embed.Dot(b, b))
	if na == 0 || nb == 0 {
		return 0
	}
	return embed.Dot(a, b) / (na * nb)
}

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }
