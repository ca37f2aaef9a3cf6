// Package retrieval holds the rules of a search's retrieval settings that both sides
// share: the named recipes, the shape of a namespace's retrieval_defaults (the write
// side validates them when a namespace is configured) and of a request's overrides
// (the read side settles them), and the bounds every value must keep.
package retrieval

import (
	"fmt"
	"slices"

	"github.com/loomplane/loom/internal/memrow"
)

// Recipes: named presets of the settings below, for the usual intents.
const (
	// RecipeDefault is the service's configuration as it is.
	RecipeDefault = "default"
	// RecipePrecise favours exact evidence (words, keys) and abstains sooner. Measured
	// (tests/quality/RESULTS-gates.md): 25-27 of 28 no-answer conversation questions
	// abstain against the default's 24-25, at the cost of 0-3 more answerable ones.
	RecipePrecise = "precise"
	// RecipeBroad reads every leg with a deeper pool, splits multi-part questions and
	// abstains later: recall over precision. Measured, its verdict all but never
	// abstains (1 of 136 no-answer searches did, two embedders: grounding annotates, and
	// min_distinctness 0.5 is below nearly every question's distinctness, answerable or
	// not): a caller of broad who wants a line draws it on retrieval_risk's components
	// (distinctness, the missing identifiers, attribute_missing).
	RecipeBroad = "broad"
	// RecipeRecent prefers newer rows (the recency prior).
	RecipeRecent = "recent"
)

// Recipes lists the recipe names.
func Recipes() []string { return []string{RecipeDefault, RecipePrecise, RecipeBroad, RecipeRecent} }

// Legs a setting may name (the chunk windows go with vector).
const (
	LegVector  = "vector"
	LegLexical = "lexical"
	LegKey     = "key"
	LegGraph   = "graph"
)

// Legs lists the leg names.
func Legs() []string { return []string{LegVector, LegLexical, LegKey, LegGraph} }

// Evidence legs a setting may name (evidence_legs): the search route's legs over what is
// not a memory row, served in the answer's evidence section.
const (
	EvidenceTurns    = "turns"    // verbatim chunks of the conversation's turns
	EvidenceDigests  = "digests"  // session digests (loom.session_summaries)
	EvidenceEntities = "entities" // entity summaries (loom.entity_communities)
)

// EvidenceLegs lists the evidence legs' names, the order their explain block keeps.
func EvidenceLegs() []string { return []string{EvidenceTurns, EvidenceDigests, EvidenceEntities} }

// Identifier grounding: what a search does when the query names an identifier (a
// name, a code, a number, a quoted phrase) no hit holds.
const (
	GroundingAbstain  = "abstain"  // the verdict abstains (ungrounded_identifier)
	GroundingAnnotate = "annotate" // the answer names the missing identifiers; the verdict stands
	GroundingOff      = "off"
)

// Bounds a setting must keep, whoever sets it.
const (
	MinPool          = 10
	MaxPool          = 2000
	MaxDistinctness  = 10.0
	MaxRerankDepth   = 100
	maxLegsInSetting = 4
)

// Weights are weighted fusion's leg weights; a nil weight is not set here.
type Weights struct {
	Vector  *float64 `json:"vector,omitempty"`
	Lexical *float64 `json:"lexical,omitempty"`
	Key     *float64 `json:"key,omitempty"`
	Graph   *float64 `json:"graph,omitempty"`
}

// Settings are retrieval settings as a namespace's retrieval_defaults or a request
// hold them: every field is optional, and an unset one leaves the layer below as it
// is. A search layers them: the service's configuration, the recipe's preset, the
// namespace's retrieval_defaults, then the request's own fields.
type Settings struct {
	// Recipe names the preset applied first (a request's replaces the namespace's).
	Recipe string `json:"recipe,omitempty"`
	// Legs are the legs that run (vector, lexical, key, graph).
	Legs []string `json:"legs,omitempty"`
	// Weights weigh the legs in weighted fusion.
	Weights *Weights `json:"weights,omitempty"`
	// Pool is how many rows each leg ranks at least.
	Pool int `json:"pool,omitempty"`
	// MinScore is the relevance floor (below_threshold) used when the namespace has
	// no calibration, or always when set here.
	MinScore *float64 `json:"min_score,omitempty"`
	// MinDistinctness is the calibrated gate: how many background spreads the best
	// hit must stand above the pool's tenth, per unit of the headroom the tenth leaves
	// (low_calibrated_confidence below it; query/calibrate.go).
	MinDistinctness *float64 `json:"min_distinctness,omitempty"`
	// Grounding is abstain, annotate or off.
	Grounding string `json:"grounding,omitempty"`
	// Rerank sends the page to the configured reranker.
	Rerank *bool `json:"rerank,omitempty"`
	// SubQueries splits a multi-part question and gives each part its own slots.
	SubQueries *bool `json:"sub_queries,omitempty"`
	// SetExpansion searches once more for the names the best hits hold that the query
	// does not (the bridge of a multi-hop question) and gives those rows slots too.
	SetExpansion *bool `json:"set_expansion,omitempty"`
	// AnchorPool reads the heads said in a question's short spans of time (a day, at
	// most 31 days) and adds those stating an asked date that no leg found.
	AnchorPool *bool `json:"anchor_pool,omitempty"`
	// Recency adds the recency prior.
	Recency *bool `json:"recency,omitempty"`
	// Evidence runs the search route's evidence legs (verbatim chunks, session digests)
	// when the scope keeps turns; off unless a layer turns it on.
	Evidence *bool `json:"evidence,omitempty"`
	// EvidenceLegs are the evidence legs that run when Evidence is on (turns, digests,
	// entities); unset, all of them.
	EvidenceLegs []string `json:"evidence_legs,omitempty"`
}

// Preset is a recipe's settings (the default recipe sets nothing).
func Preset(recipe string) Settings {
	switch recipe {
	case RecipePrecise:
		return Settings{Legs: []string{LegVector, LegLexical, LegKey}, Weights: &Weights{Vector: f(0.20), Lexical: f(0.40), Key: f(0.40)},
			MinDistinctness: f(2.0), Grounding: GroundingAbstain, SubQueries: b(false)}
	case RecipeBroad:
		return Settings{Legs: Legs(), Pool: 400, MinDistinctness: f(0.5), Grounding: GroundingAnnotate, SubQueries: b(true)}
	case RecipeRecent:
		return Settings{Recency: b(true)}
	}
	return Settings{}
}

func f(v float64) *float64 { return &v }
func b(v bool) *bool       { return &v }

// Over layers o over s: each field o sets replaces s's.
func (s Settings) Over(o Settings) Settings {
	out := s
	if o.Recipe != "" {
		out.Recipe = o.Recipe
	}
	if len(o.Legs) > 0 {
		out.Legs = o.Legs
	}
	if o.Weights != nil {
		w := Weights{}
		if s.Weights != nil {
			w = *s.Weights
		}
		for _, p := range []struct {
			dst **float64
			src *float64
		}{
			{&w.Vector, o.Weights.Vector}, {&w.Lexical, o.Weights.Lexical}, {&w.Key, o.Weights.Key}, {&w.Graph, o.Weights.Graph}} {
			if p.src != nil {
				*p.dst = p.src
			}
		}
		out.Weights = &w
	}
	if o.Pool != 0 {
		out.Pool = o.Pool
	}
	if o.MinScore != nil {
		out.MinScore = o.MinScore
	}
	if o.MinDistinctness != nil {
		out.MinDistinctness = o.MinDistinctness
	}
	if o.Grounding != "" {
		out.Grounding = o.Grounding
	}
	if o.Rerank != nil {
		out.Rerank = o.Rerank
	}
	if o.SubQueries != nil {
		out.SubQueries = o.SubQueries
	}
	if o.SetExpansion != nil {
		out.SetExpansion = o.SetExpansion
	}
	if o.AnchorPool != nil {
		out.AnchorPool = o.AnchorPool
	}
	if o.Recency != nil {
		out.Recency = o.Recency
	}
	if o.Evidence != nil {
		out.Evidence = o.Evidence
	}
	if len(o.EvidenceLegs) > 0 {
		out.EvidenceLegs = o.EvidenceLegs
	}
	return out
}

// Validate checks the settings against the bounds; field names the errors (for a
// namespace's, "retrieval_defaults").
func (s Settings) Validate(field string) error {
	name := func(n string) string {
		if field == "" {
			return n
		}
		return field + "." + n
	}
	bad := func(n, format string, args ...any) error {
		return &memrow.FieldError{Field: name(n), Code: memrow.CodeValidationFailed, Message: name(n) + " " + fmt.Sprintf(format, args...)}
	}
	if s.Recipe != "" && !slices.Contains(Recipes(), s.Recipe) {
		return bad("recipe", "must be one of %v", Recipes())
	}
	if len(s.Legs) > maxLegsInSetting {
		return bad("legs", "names at most %d legs", maxLegsInSetting)
	}
	ranking := false
	for _, l := range s.Legs {
		if !slices.Contains(Legs(), l) {
			return bad("legs", "may name %v", Legs())
		}
		ranking = ranking || l != LegGraph
	}
	if len(s.Legs) > 0 && !ranking {
		return bad("legs", "must name vector, lexical or key (graph only adds to them)")
	}
	if w := s.Weights; w != nil {
		for _, p := range []struct {
			n string
			v *float64
		}{{"vector", w.Vector}, {"lexical", w.Lexical}, {"key", w.Key}, {"graph", w.Graph}} {
			if p.v != nil && (*p.v < 0 || *p.v > 1) {
				return bad("weights."+p.n, "must be in [0, 1]")
			}
		}
	}
	if s.Pool != 0 && (s.Pool < MinPool || s.Pool > MaxPool) {
		return bad("pool", "must be between %d and %d", MinPool, MaxPool)
	}
	if s.MinScore != nil && (*s.MinScore < 0 || *s.MinScore > 1) {
		return bad("min_score", "must be in [0, 1]")
	}
	if s.MinDistinctness != nil && (*s.MinDistinctness < 0 || *s.MinDistinctness > MaxDistinctness) {
		return bad("min_distinctness", "must be in [0, %g]", MaxDistinctness)
	}
	switch s.Grounding {
	case "", GroundingAbstain, GroundingAnnotate, GroundingOff:
	default:
		return bad("grounding", "must be abstain, annotate or off")
	}
	if len(s.EvidenceLegs) > len(EvidenceLegs()) {
		return bad("evidence_legs", "names at most %d legs", len(EvidenceLegs()))
	}
	for _, l := range s.EvidenceLegs {
		if !slices.Contains(EvidenceLegs(), l) {
			return bad("evidence_legs", "may name %v", EvidenceLegs())
		}
	}
	return nil
}
