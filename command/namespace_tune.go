package command

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/httperr"
)

// namespace.tune reports the calibration the namespace's own vectors suggest for its
// similarity gates, and applies nothing: it is a diagnostic report (postgres-authority
// lists it with namespace.audit and namespace.validate), and an admin who agrees PUTs
// the suggested policy. The seed calibrates from the embedder's own cosine distribution
// (memory-architecture, LOOM_ADAPTIVE_THRESHOLDS): the cosines of pairs of different
// keys of one type are, for almost every pair, two unrelated statements, so the
// distribution's upper tail is where unrelated rows stop and close peers begin. The
// conflict gate of a type is suggested at the larger of that background's 99th
// percentile and its mean plus three spreads, rounded up to a hundredth, held below
// LOOM_DUPLICATE_THRESHOLD and at or above tuneFloor. The report starts at the
// barrier; a wait that runs out does not fail it: it reads what ClickHouse holds and
// names projection in skipped.

const (
	// tuneSampleRows bounds the vectors read per type; tuneMinPairs is the fewest pairs
	// a type's suggestion needs.
	tuneSampleRows = 400
	tuneMinPairs   = 20
	tuneFloor      = 0.5
	// tuneMargin: a current threshold within it of the suggestion is left as it is.
	tuneMargin = 0.02
	tuneWait   = 5 * time.Second
)

// tuneType is one memory type's calibration.
type tuneType struct {
	MemoryType string  `json:"memory_type"`
	Rows       int     `json:"rows"`
	Pairs      int     `json:"pairs"`
	Mean       float64 `json:"mean"`
	Spread     float64 `json:"spread"`
	P50        float64 `json:"p50"`
	P99        float64 `json:"p99"`
	Max        float64 `json:"max"`
	// Current is the conflict gate the type has now, and its source: the type's
	// dedup_threshold, the namespace's conflict_threshold, or LOOM_CONFLICT_THRESHOLD.
	Current       float64  `json:"current"`
	CurrentSource string   `json:"current_source"`
	Suggested     *float64 `json:"suggested"`
	// Reason says why there is no suggestion (too_few_pairs) or why the current
	// threshold stands (within_margin).
	Reason string `json:"reason,omitempty"`
}

// tuneAnswer is namespace.tune's report: per type, and the policy patch that applies
// the suggestions (a PUT of the namespace's policy with these fields).
type tuneAnswer struct {
	Namespace string         `json:"namespace"`
	Types     []tuneType     `json:"types"`
	Patch     map[string]any `json:"patch"`
	Skipped   []string       `json:"skipped"`
}

// tuneNamespace is namespace.tune.
func (s *Service) tuneNamespace(ctx context.Context, p auth.Principal, ns string) (*tuneAnswer, error) {
	if err := p.RequireAdmin("tuning a namespace"); err != nil {
		return nil, err
	}
	if err := p.RequireEveryUser("tuning a namespace"); err != nil {
		return nil, err
	}
	cfg, found, err := s.storedConfig(ctx, p.Org, ns)
	if err != nil {
		return nil, httperr.Store("reading the namespace policy", err)
	}
	if !found {
		return nil, httperr.NotFound("namespace not found")
	}
	ans := &tuneAnswer{Namespace: ns, Types: []tuneType{}, Patch: map[string]any{}, Skipped: []string{}}
	if !s.tuneBarrier(ctx, p.Org, ns) {
		ans.Skipped = append(ans.Skipped, "projection")
	}
	vectors, err := s.tuneVectors(ctx, p.Org, ns)
	if err != nil {
		return nil, httperr.ClickHouse("reading the namespace's vectors", err, ch.Unavailable(err))
	}
	types := make([]string, 0, len(vectors))
	for t := range vectors {
		types = append(types, t)
	}
	slices.Sort(types)
	patchTypes := map[string]any{}
	for _, t := range types {
		tt := s.calibrateType(t, vectors[t], cfg)
		if tt.Suggested != nil && tt.Reason == "" {
			patchTypes[t] = map[string]any{"dedup_threshold": *tt.Suggested}
		}
		ans.Types = append(ans.Types, tt)
	}
	if len(patchTypes) > 0 {
		ans.Patch["types"] = patchTypes
	}
	return ans, nil
}

// tuneBarrier waits, within tuneWait, for ClickHouse to hold every row the namespace's
// heads committed; it reports whether it does.
func (s *Service) tuneBarrier(ctx context.Context, org, ns string) bool {
	var last int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM loom.memory_current WHERE org = $1 AND namespace = $2`, org, ns).
		Scan(&last); err != nil {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, tuneWait)
	defer cancel()
	_, err := s.waitProjected(wctx, org, map[string]int64{ns: last})
	return err == nil
}

// tuneVectors reads at most tuneSampleRows vectors of each type's established rows.
func (s *Service) tuneVectors(ctx context.Context, org, ns string) (map[string][][]float32, error) {
	out := map[string][][]float32{}
	err := s.ch.Each(s.ch.Ctx(ctx), `SELECT memory_type, embedding FROM `+ch.Database+`.memory_embeddings FINAL
		PREWHERE org = ? AND namespace = ?
		WHERE tombstone = 0 AND embedding_dim > 0 AND status IN ('active', 'conflicted')
		ORDER BY memory_type, cityHash64(agent, user_id, session_id, memory_key)
		LIMIT ? BY memory_type`, []any{org, ns, uint64(tuneSampleRows)}, func(scan func(...any) error) error {
		var t string
		var v []float32
		if err := scan(&t, &v); err != nil {
			return err
		}
		out[t] = append(out[t], v)
		return nil
	})
	return out, err
}

// calibrateType is one type's background distribution and suggestion.
func (s *Service) calibrateType(memoryType string, vecs [][]float32, cfg NamespaceConfig) tuneType {
	tt := tuneType{MemoryType: memoryType, Rows: len(vecs)}
	tt.Current, tt.CurrentSource = s.cfg.ConflictThreshold, "LOOM_CONFLICT_THRESHOLD"
	if cfg.ConflictThreshold != nil {
		tt.Current, tt.CurrentSource = *cfg.ConflictThreshold, "conflict_threshold"
	}
	if d := cfg.typeConfig(memoryType).DedupThreshold; d != nil {
		tt.Current, tt.CurrentSource = *d, "types."+memoryType+".dedup_threshold"
	}
	cos := pairCosines(vecs)
	tt.Pairs = len(cos)
	if len(cos) < tuneMinPairs {
		tt.Reason = "too_few_pairs"
		return tt
	}
	slices.Sort(cos)
	var sum float64
	for _, c := range cos {
		sum += c
	}
	tt.Mean = sum / float64(len(cos))
	var ss float64
	for _, c := range cos {
		ss += (c - tt.Mean) * (c - tt.Mean)
	}
	tt.Spread = math.Sqrt(ss / float64(len(cos)))
	tt.P50, tt.P99, tt.Max = quantile(cos, 0.5), quantile(cos, 0.99), cos[len(cos)-1]
	sug := math.Ceil(math.Max(tt.P99, tt.Mean+3*tt.Spread)*100) / 100
	sug = math.Max(sug, tuneFloor)
	if dup := s.cfg.DuplicateThreshold; dup > 0 {
		sug = math.Min(sug, math.Floor((dup-0.01)*100)/100)
	}
	tt.Suggested = &sug
	if math.Abs(sug-tt.Current) < tuneMargin {
		tt.Reason = "within_margin"
	}
	tt.Mean, tt.Spread, tt.P50, tt.P99, tt.Max = round4(tt.Mean), round4(tt.Spread), round4(tt.P50), round4(tt.P99), round4(tt.Max)
	return tt
}

// pairCosines are the cosines of every pair of distinct vectors.
func pairCosines(vecs [][]float32) []float64 {
	norms := make([]float64, len(vecs))
	for i, v := range vecs {
		norms[i] = math.Sqrt(dot(v, v))
	}
	var out []float64
	for i := range vecs {
		for j := i + 1; j < len(vecs); j++ {
			if len(vecs[i]) != len(vecs[j]) || norms[i] == 0 || norms[j] == 0 {
				continue
			}
			out = append(out, dot(vecs[i], vecs[j])/(norms[i]*norms[j]))
		}
	}
	return out
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// quantile of sorted xs, nearest rank.
func quantile(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
