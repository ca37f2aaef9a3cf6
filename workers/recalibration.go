package workers

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/scorebg"
)

// The recalibration pass (memory-architecture, "Background passes", recalibration: the
// embedder's score distribution in, calibration thresholds out; on by default,
// LOOM_RECALIBRATION_ENABLED): a consumer of the topic (due_passes.go) for which any
// revision makes its namespace due, no model. It rewrites a due namespace's search
// background in loom.search_calibration, the one the calibrated gates borrow when a
// search's own pool is too small to hold one (query/calibrate.go). Searches record
// their pools' backgrounds as they run, so a namespace searched only through narrow
// filters has none, and one whose content has changed keeps up to 128 old ones. The
// pass measures the background from the namespace's vectors as the embedder scores
// them now: each probe (the rows its usage, recall_count and reinforcement_count, says
// searches find most, then a hash sample) is a query whose answer is itself, and the
// sampled rows' cosines to it, ranked, give one background (internal/scorebg, the
// statistic search reads its pools with). The probes' backgrounds replace the
// namespace's recorded ones (command.KeepRecalibration), stamped recalibrated_at; the
// searches after it append theirs. The recalibration is periodic by nature (a window
// of the namespace's vectors): a namespace is recalibrated once the projection holds
// records it is due for (the newer wait for it), at most once per LOOM_RECALIBRATION_INTERVAL_MS
// (records after a recalibration wait for the interval's end, then one recalibration
// stamps them all), and only with enough vectors of the running embedder (with fewer,
// its records are stamped and a later write makes it due again, once it can have
// enough: recalShortfalls). A pass killed midway
// leaves each namespace's backgrounds as they were or replaced whole, and its items owed.

const workerRecalibration = "recalibration"

const (
	// recalibrationSample bounds the vectors read per namespace; recalibrationProbes is
	// how many of them are probes (backgrounds written).
	recalibrationSample = 400
	recalibrationProbes = 32
)

// RunRecalibration runs the recalibration pass until ctx ends: woken by its feed, and
// every minute at most for the namespaces whose interval ended.
func (s *Service) RunRecalibration(ctx context.Context) {
	cfg := s.cfg.Recalibration
	s.runPasses(ctx, workerRecalibration, s.soon(workerRecalibration), cfg.MaxAge+24*time.Hour, s.recalibrationPass)
}

// OnRecalibrated is called after a namespace's backgrounds are rewritten: a process
// that also serves search drops its cached calibration (query.Service.ForgetCalibration).
func (s *Service) OnRecalibrated(f func(org, namespace, embedder string)) { s.recalibrated = f }

// recalibrationPass recalibrates the namespaces of a batch of records.
func (s *Service) recalibrationPass(ctx context.Context) passResult {
	if s.ch == nil {
		return passResult{errors: 1, stopped: true}
	}
	cfg, model := s.cfg.Recalibration, s.embedder.Model()
	return s.dueNamespacePass(ctx, workerRecalibration, cfg.Batch, cfg.MaxAge, outcomeRecalibrated, true, func(ctx context.Context, d dueNamespace) error {
		k := shortKey{d.org, d.namespace, model}
		if s.recalShort.stillShort(k, d.maxSeq) {
			return nil // too few vectors at the last sample, and too few revisions since to reach the minimum
		}
		last, err := s.recalibratedAt(ctx, d.org, d.namespace, model)
		if err != nil {
			return err
		}
		if err := s.spaced(last, cfg.Interval); err != nil {
			return err
		}
		sampled, err := s.recalibrate(ctx, d.org, d.namespace, model)
		if err == nil {
			s.recalShort.note(k, d.maxSeq, sampled)
		}
		return err
	})
}

// recalShortfalls keeps, per namespace and embedder, how far its last sample fell
// short of the vectors a background needs (scorebg.From+scorebg.Min). Every revision
// makes its namespace due, and a namespace below the minimum was sampled at each pass
// (a FINAL read of its vectors in ClickHouse, which reads whole granules of the vector
// columns). A revision adds at most one vector, so a namespace holds no more vectors
// than the seqs it has drawn, and a sample short by n at seq s cannot be made whole
// before seq s+n: until then none is taken. A namespace never sampled is short by the
// whole minimum at seq 0: the set scenario's 32 new namespaces were each read once,
// about 32 ClickHouse reads per run that one namespace does not pay, and the case's
// ClickHouse CPU per write was 2-4x the one-namespace case's.
type recalShortfalls struct {
	mu sync.Mutex
	m  map[shortKey]shortfall
}

type shortKey struct{ org, namespace, model string }

// shortfall is a sample's: the newest seq the projection held then, and the vectors
// it lacked.
type shortfall struct{ seq, need int64 }

// recalShortMax bounds the namespaces kept; past it the map starts again (a namespace
// forgotten is only sampled once more).
const recalShortMax = 16384

// stillShort reports whether a namespace due up to seq cannot have enough vectors yet.
// A seq below the sample's is a namespace deleted and made again: sampled again.
func (r *recalShortfalls) stillShort(k shortKey, seq int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.m[k]
	if !ok {
		f = shortfall{seq: 0, need: scorebg.From + scorebg.Min}
	}
	return seq >= f.seq && seq < f.seq+f.need
}

// note keeps a namespace's sample of sampled vectors taken with the projection at seq
// (sampled < 0: the sample was enough, and the namespace is forgotten).
func (r *recalShortfalls) note(k shortKey, seq int64, sampled int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	need := int64(scorebg.From + scorebg.Min - sampled)
	if sampled < 0 || need <= 0 {
		delete(r.m, k)
		return
	}
	if r.m == nil || len(r.m) >= recalShortMax {
		r.m = map[shortKey]shortfall{}
	}
	r.m[k] = shortfall{seq: seq, need: need}
}

// recalibratedAt is when the namespace's backgrounds of model were last recalibrated
// (zero: never).
func (s *Service) recalibratedAt(ctx context.Context, org, ns, model string) (time.Time, error) {
	var at *time.Time
	err := s.pool.QueryRow(ctx, `SELECT max(recalibrated_at) FROM loom.search_calibration
		WHERE org = $1 AND namespace = $2 AND embedder = $3`, org, ns, model).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the recalibration stamp: %w", err)
	}
	if at == nil {
		return time.Time{}, nil
	}
	return *at, nil
}

// recalibrate measures one namespace's backgrounds and keeps them; sampled is how many
// vectors it read when they were too few for a background, else -1.
func (s *Service) recalibrate(ctx context.Context, org, ns, model string) (sampled int, err error) {
	ids, vecs, err := s.recalibrationSample(ctx, org, ns, model)
	if err != nil {
		return -1, err
	}
	if len(vecs) < scorebg.From+scorebg.Min {
		return len(vecs), nil // too few vectors for a background: the recorded ones stand
	}
	used, err := s.mostUsed(ctx, org, ns)
	if err != nil {
		return -1, err
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
		return -1, nil // too few comparable vectors: the recorded backgrounds stand
	}
	if err := s.cmd.KeepRecalibration(ctx, org, ns, model, samples, s.now()); err != nil {
		return -1, err
	}
	if s.recalibrated != nil {
		s.recalibrated(org, ns, model)
	}
	return -1, nil
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
