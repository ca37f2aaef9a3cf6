package query

import (
	"context"
	"math"

	"github.com/loomplane/loom/internal/httperr"
)

// Verdicts the calibrated gates and grounding add to no_match and below_threshold.
const (
	// VerdictLowConfidence: the best hit does not stand out of the background (the
	// near misses the same query finds in the namespace).
	VerdictLowConfidence Verdict = "low_calibrated_confidence"
	// VerdictUngrounded: the query names an identifier no hit holds, or asks about its
	// entities something no hit naming them states.
	VerdictUngrounded Verdict = "ungrounded_identifier"
)

// What grounding confirmed when it waives the distinctness gate (grounding.confirmation).
const (
	waivedByAttribute   = "attribute"   // the question's attribute, in a hit naming its entity
	waivedByIdentifiers = "identifiers" // the question's names, together in one hit
)

// gate is one check of the verdict, as the answer explains it.
type gate struct {
	Name      string  `json:"name"` // hits, floor, distinctness, grounding
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	Passed    bool    `json:"passed"`
	// Source says where the threshold came from: the search's pool, the namespace's
	// recorded backgrounds, the scalar setting.
	Source string `json:"source,omitempty"`
	// Waived names what decided in a failed reading's stead: on the distinctness gate,
	// what grounding found of what the question asks, attribute or identifiers (decide).
	Waived string `json:"waived,omitempty"`
}

// verdictInput is what the gates read: the served page's best relevance in fused
// order (before any reranker moved it), the background and the grounding.
type verdictInput struct {
	hits      int
	best      float64
	bg        background
	settings  retrievalSettings
	grounding grounding
}

// decide runs the gates in the seeds' order (empty, floor, calibrated confidence,
// grounding) and answers the first that fails, with every gate's reading.
func decide(in verdictInput) (Verdict, []gate) {
	var gates []gate
	verdict := VerdictOK
	fail := func(v Verdict) {
		if verdict == VerdictOK {
			verdict = v
		}
	}
	if in.hits == 0 {
		return VerdictNoMatch, []gate{{Name: "hits", Threshold: 1}}
	}
	gates = append(gates, gate{Name: "hits", Value: float64(in.hits), Threshold: 1, Passed: true})
	floor, source := in.settings.MinScore, calibrationFallback
	if in.settings.Adaptive && !in.settings.MinScoreSet && in.bg.Source != calibrationFallback {
		floor, source = in.bg.Median, in.bg.Source
	}
	g := gate{Name: "floor", Value: round6(in.best), Threshold: round6(floor), Passed: in.best >= floor, Source: source}
	if in.settings.MinScoreSet {
		g.Source = "setting"
	}
	gates = append(gates, g)
	if !g.Passed {
		fail(VerdictBelowThreshold)
	}
	if d, ok := in.bg.distinctness(in.best); ok && in.settings.Adaptive && in.settings.MinDistinctness > 0 {
		g := gate{Name: "distinctness", Value: round6(d), Threshold: in.settings.MinDistinctness, Passed: d >= in.settings.MinDistinctness,
			Source: in.bg.Source}
		// Distinctness is the evidence of a question the planner cannot read; one that
		// names an entity and asks something of it is judged by grounding, which reads
		// the hits themselves. Under a semantic embedder the entity's other rows (a
		// speaker's every turn, the same topic in another session) score in a narrow band
		// just under the answer, so right answers and unanswerable questions about the
		// same entity stand equally few spreads out (tests/quality/RESULTS-gates.md);
		// a hit naming the entity and stating what is asked (or holding all the names a
		// question asks nothing else of) tells them apart.
		if c := in.grounding.confirmation(); !g.Passed && c != "" {
			g.Passed, g.Waived = true, c
		}
		gates = append(gates, g)
		if !g.Passed {
			fail(VerdictLowConfidence)
		}
	}
	if in.grounding.Setting != "off" {
		missing := float64(len(in.grounding.Missing))
		g := gate{Name: "grounding", Value: missing, Threshold: 0, Passed: missing == 0, Source: in.grounding.Setting}
		gates = append(gates, g)
		// The attribute's gate reads 1 when it is missing; its source is its effect
		// (abstain, or risk: the gate passes and the risk says it).
		if a := in.grounding.Attribute; a != nil {
			g := gate{Name: "attribute", Threshold: 0, Passed: !a.abstains(), Source: a.Effect}
			if a.missing() {
				g.Value = 1
			}
			gates = append(gates, g)
		}
		if in.grounding.ungrounded() {
			fail(VerdictUngrounded)
		}
	}
	return verdict, gates
}

// retrievalRisk says how likely the served hits are not the answer, with the readings
// it is made of, so a caller can set its own line.
type retrievalRisk struct {
	// Score is in [0, 1]: about 0.5 at a gate's threshold, higher below it.
	Score      float64        `json:"score"`
	Level      string         `json:"level"` // low (< 0.33), medium, high (>= 0.66)
	Components riskComponents `json:"components"`
}

type riskComponents struct {
	Relevance float64 `json:"relevance"` // the best served hit's
	Floor     float64 `json:"floor"`
	// Distinctness is the best hit's height above the background in spreads (null
	// without a background).
	Distinctness       *float64 `json:"distinctness"`
	Calibration        string   `json:"calibration"` // pool, namespace or fallback
	MissingIdentifiers []string `json:"missing_identifiers"`
	// AttributeMissing: no hit naming the query's entity states what it asks (by
	// the reading grounding.attribute.basis names); it raises the risk to 0.9 whether
	// or not its effect abstains the verdict.
	AttributeMissing bool `json:"attribute_missing"`
	// Margin is the best hit's fused score over the second's, as a share of the
	// first's: a near tie is a coin toss between two answers.
	Margin       float64 `json:"margin"`
	StaleDropped int     `json:"stale_dropped"`
	RerankFailed bool    `json:"rerank_failed"`
}

// riskOf combines the readings: the worst of the weak-evidence risk (distinctness
// against its threshold, or relevance against the floor without a background) and
// grounding, raised a little by a near tie and by a failed reranker.
func riskOf(in verdictInput, gates []gate, hits []hitView, stale int, rr rerankOutcome) retrievalRisk {
	c := riskComponents{Relevance: round6(in.best), Calibration: in.bg.Source, MissingIdentifiers: in.grounding.Missing,
		StaleDropped: stale, RerankFailed: rr.Status == "failed"}
	if c.MissingIdentifiers == nil {
		c.MissingIdentifiers = []string{}
	}
	c.AttributeMissing = in.grounding.Attribute.missing()
	var floor, dist *gate
	for i := range gates {
		switch gates[i].Name {
		case "floor":
			floor = &gates[i]
			c.Floor = floor.Threshold
		case "distinctness":
			dist = &gates[i]
			d := dist.Value
			c.Distinctness = &d
		}
	}
	var risk float64
	switch {
	case len(hits) == 0 || floor == nil || !floor.Passed:
		risk = 1
	case dist != nil:
		risk = logistic(2 * (dist.Threshold - dist.Value))
	default:
		risk = logistic(10 * (floor.Threshold - floor.Value))
	}
	if len(hits) > 1 && hits[0].Scores["fused"] > 0 {
		c.Margin = round6((hits[0].Scores["fused"] - hits[1].Scores["fused"]) / hits[0].Scores["fused"])
		risk += 0.1 * (1 - math.Min(1, c.Margin*10))
	}
	if len(c.MissingIdentifiers) > 0 || c.AttributeMissing {
		risk = math.Max(risk, 0.9)
	}
	if c.RerankFailed {
		risk += 0.05
	}
	risk = math.Min(1, math.Max(0, risk))
	level := "low"
	switch {
	case risk >= 0.66:
		level = "high"
	case risk >= 0.33:
		level = "medium"
	}
	return retrievalRisk{Score: round6(risk), Level: level, Components: c}
}

func logistic(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// judge gives a served page its verdict, grounding, retrieval risk and explain
// block, reranks it, and keeps the trace when the request asks. A later page keeps
// its first page's verdict (ok, unless it is empty): the gates judge a search once.
func (s *Service) judge(ctx context.Context, plan *searchPlan, offset int, ans *searchAnswer) error {
	hits := ans.Hits
	g := ground(plan.settings.Grounding, plan.query, hits)
	in := verdictInput{hits: len(hits), best: bestRelevance(hits), settings: plan.settings, grounding: g,
		bg: background{Source: calibrationFallback}}
	if offset == 0 {
		in.bg = s.settleBackground(ctx, calibrationKey{plan.f.org, plan.namespaces[0], s.embedder.Model()}, plan.whole)
	}
	// The attribute's similarity must stand a spread above the background's median
	// (the calibrated floor): a typical unrelated row reaches the median itself.
	floor := plan.settings.MinScore
	if in.bg.Source != calibrationFallback && !plan.settings.MinScoreSet {
		floor = in.bg.Median + in.bg.Spread
	}
	s.judgeAttributeSimilarity(ctx, g.Attribute, plan.req.Query, plan.query, hits, floor)
	verdict, gates := decide(in)
	if offset > 0 && verdict != VerdictNoMatch {
		verdict = VerdictOK
	}
	risk := riskOf(in, gates, hits, ans.StaleDropped, rerankOutcome{})
	rr := rerankOutcome{Status: "off"}
	if offset == 0 {
		rr = s.rerankPage(ctx, plan.f.org, plan, hits)
		if rr.Status == "failed" {
			risk = riskOf(in, gates, hits, ans.StaleDropped, rr)
		}
	}
	ans.Verdict, ans.Grounding, ans.RetrievalRisk = verdict, g, risk
	ans.Explain = &explain{Settings: plan.settings, Plan: plan.query, Background: in.bg, Gates: gates, Rerank: rr, HyDE: plan.hyde,
		Anchor: plan.anchor.reported()}
	if t := plan.trace; t != nil {
		t.Background, t.Gates, t.Grounding, t.Rerank, t.Verdict = in.bg, gates, g, rr, verdict
		t.served(hits)
		id, err := s.keepTrace(ctx, plan.f.org, plan.f.userID, plan.f.sessionID, t)
		if err != nil {
			return httperr.Store("keeping the search trace", err)
		}
		ans.TraceID = id
	}
	return nil
}
