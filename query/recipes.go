package query

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/retrieval"
)

// retrievalSettings are a search's retrieval settings once settled: the service's
// configuration, then the recipe's preset, then the namespace's retrieval_defaults,
// then the request's own fields (retrieval.Settings.Over), each within the bounds
// retrieval.Settings.Validate keeps.
type retrievalSettings struct {
	Recipe  string   `json:"recipe"`
	Legs    []string `json:"legs"`
	Weights struct {
		Vector  float64 `json:"vector"`
		Lexical float64 `json:"lexical"`
		Key     float64 `json:"key"`
		Graph   float64 `json:"graph"`
	} `json:"weights"`
	Pool int `json:"pool"`
	// MinScore is the scalar floor: used when the search has no calibration, or
	// always when a layer set it (MinScoreSet).
	MinScore        float64 `json:"min_score"`
	MinScoreSet     bool    `json:"-"`
	MinDistinctness float64 `json:"min_distinctness"`
	Adaptive        bool    `json:"adaptive_thresholds"`
	Grounding       string  `json:"grounding"`
	Rerank          bool    `json:"rerank"`
	SubQueries      bool    `json:"sub_queries"`
	SetExpansion    bool    `json:"set_expansion"`
	AnchorPool      bool    `json:"anchor_pool"` // the date anchor pool (anchor_pool.go)
	Recency         bool    `json:"recency"`
	// HyDE: a model's hypothetical answer joins the vector leg (hyde.go); the
	// deployment's setting, on only with a model provider.
	HyDE     bool `json:"hyde"`
	Evidence bool `json:"evidence"`
	// EvidenceLegs are the evidence legs that run when Evidence is on.
	EvidenceLegs []string `json:"evidence_legs"`
}

func (r retrievalSettings) weights() Weights {
	return Weights{Vector: r.Weights.Vector, Lexical: r.Weights.Lexical, Key: r.Weights.Key, Graph: r.Weights.Graph}
}

func (r retrievalSettings) runs(leg string) bool { return slices.Contains(r.Legs, leg) }

// overrides are the request's retrieval fields as one layer.
func (req *searchRequest) overrides() retrieval.Settings {
	o := retrieval.Settings{Recipe: req.Recipe, Legs: req.Legs, Weights: req.Weights, Pool: req.Pool, MinScore: req.MinScore,
		MinDistinctness: req.MinDistinctness, Grounding: req.Grounding, Rerank: req.Rerank, SubQueries: req.SubQueries,
		SetExpansion: req.SetExpansion, AnchorPool: req.AnchorPool, Evidence: req.Evidence, EvidenceLegs: req.EvidenceLegs}
	if req.Recency {
		o.Recency = &req.Recency
	}
	return o
}

// settleRetrieval layers the settings; a request's graph option adds the graph leg.
func (s *Service) settleRetrieval(namespace retrieval.Settings, req *searchRequest) (retrievalSettings, error) {
	o := req.overrides()
	if err := o.Validate(""); err != nil {
		return retrievalSettings{}, err
	}
	c := s.cfg.Retrieval
	out := retrievalSettings{Recipe: retrieval.RecipeDefault, Legs: []string{retrieval.LegVector, retrieval.LegLexical, retrieval.LegKey},
		Pool: c.LegPool, MinScore: s.cfg.MinScore, MinDistinctness: c.MinDistinctness, Adaptive: c.AdaptiveThresholds,
		Grounding: c.Grounding, Rerank: s.reranker != nil, SubQueries: c.SubQueries,
		SetExpansion: c.SetExpansion, AnchorPool: c.AnchorPool, HyDE: s.hydeOn(), EvidenceLegs: retrieval.EvidenceLegs()}
	w := s.cfg.Weights
	out.Weights.Vector, out.Weights.Lexical, out.Weights.Key, out.Weights.Graph = w.Vector, w.Lexical, w.Key, w.Graph
	recipe := namespace.Recipe
	if o.Recipe != "" {
		recipe = o.Recipe
	}
	layered := retrieval.Settings{Recipe: recipe}.Over(retrieval.Preset(recipe))
	namespace.Recipe = ""
	layered = layered.Over(namespace).Over(o)
	if layered.Recipe != "" {
		out.Recipe = layered.Recipe
	}
	if len(layered.Legs) > 0 {
		out.Legs = append([]string(nil), layered.Legs...)
	}
	if lw := layered.Weights; lw != nil {
		for _, p := range []struct {
			dst *float64
			src *float64
		}{{&out.Weights.Vector, lw.Vector}, {&out.Weights.Lexical, lw.Lexical}, {&out.Weights.Key, lw.Key}, {&out.Weights.Graph, lw.Graph}} {
			if p.src != nil {
				*p.dst = *p.src
			}
		}
	}
	if out.Weights.Vector+out.Weights.Lexical+out.Weights.Key <= 0 {
		return retrievalSettings{}, httperr.Validation("weights", "weights of vector, lexical and key must not all be zero")
	}
	if layered.Pool != 0 {
		out.Pool = layered.Pool
	}
	if layered.MinScore != nil {
		out.MinScore, out.MinScoreSet = *layered.MinScore, true
	}
	if layered.MinDistinctness != nil {
		out.MinDistinctness = *layered.MinDistinctness
	}
	if layered.Grounding != "" {
		out.Grounding = layered.Grounding
	}
	if layered.Rerank != nil {
		out.Rerank = *layered.Rerank && s.reranker != nil
	}
	if layered.SubQueries != nil {
		out.SubQueries = *layered.SubQueries
	}
	if layered.SetExpansion != nil {
		out.SetExpansion = *layered.SetExpansion
	}
	if layered.AnchorPool != nil {
		out.AnchorPool = *layered.AnchorPool
	}
	if layered.Evidence != nil {
		out.Evidence = *layered.Evidence
	}
	if len(layered.EvidenceLegs) > 0 {
		out.EvidenceLegs = append([]string(nil), layered.EvidenceLegs...)
	}
	if layered.Recency != nil {
		out.Recency = *layered.Recency
	}
	if req.Graph && !out.runs(retrieval.LegGraph) {
		out.Legs = append(out.Legs, retrieval.LegGraph)
	}
	return out, nil
}

// namespaceConfig is what a search needs of its namespaces' configuration: which are
// public, and the retrieval_defaults of the first (the route's namespace).
type namespaceConfig struct {
	public   map[string]bool
	defaults retrieval.Settings
	// deleted is a namespace of the search that namespace.delete soft-deleted ("": none).
	deleted string
}

// queueNamespaceSettings queues the read of the namespaces' configuration on b, so a
// search reads it in the round trip that captures its generations.
func queueNamespaceSettings(b *pgx.Batch, org string, namespaces []string, into *namespaceConfig) {
	into.public = map[string]bool{}
	b.Queue(`SELECT namespace, coalesce(config->>'visibility', ''), config->'retrieval_defaults', deleted_at IS NOT NULL
		FROM loom.namespaces WHERE org = $1 AND namespace = ANY($2)`, org, namespaces).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var ns, visibility string
			var raw []byte
			var deleted bool
			if err := rows.Scan(&ns, &visibility, &raw, &deleted); err != nil {
				return err
			}
			if deleted && into.deleted == "" {
				into.deleted = ns
			}
			if visibility == "public" && len(namespaces) > 1 {
				into.public[ns] = true
			}
			if ns == namespaces[0] && raw != nil {
				if err := json.Unmarshal(raw, &into.defaults); err != nil {
					return fmt.Errorf("decode the retrieval_defaults of %s: %w", ns, err)
				}
			}
		}
		return rows.Err()
	})
}
