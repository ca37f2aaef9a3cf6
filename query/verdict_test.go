package query

import (
	"math"
	"testing"

	"github.com/loomplane/loom/internal/retrieval"
)

// poolOf builds a fused pool whose candidates have these relevances.
func poolOf(rel ...float64) []*candidate {
	out := make([]*candidate, len(rel))
	for i, r := range rel {
		out[i] = &candidate{relevance: r}
	}
	return out
}

// background40 is a pool with an answer, nine near misses at 0.3 and a background
// spread evenly over 0.1..0.29.
func background40(best float64) []*candidate {
	rel := []float64{best}
	for i := 0; i < 9; i++ {
		rel = append(rel, 0.3)
	}
	for i := 0; i < 30; i++ {
		rel = append(rel, 0.1+0.19*float64(i)/29)
	}
	return poolOf(rel...)
}

func TestPoolBackground(t *testing.T) {
	bg := poolBackground(background40(0.8))
	if bg.Source != calibrationPool || bg.Rows != 30 || math.Abs(bg.Tenth-0.29) > 1e-9 || bg.Median < 0.19 || bg.Median > 0.2 {
		t.Fatalf("background %+v", bg)
	}
	d, ok := bg.distinctness(0.8)
	if !ok || d < 5 {
		t.Errorf("an answer far above the near misses: distinctness %v %v", d, ok)
	}
	if d, _ := bg.distinctness(0.3); d > 0.5 {
		t.Errorf("a best hit level with the near misses: distinctness %v", d)
	}
	if bg := poolBackground(poolOf(0.9, 0.2, 0.1)); bg.Source != calibrationFallback {
		t.Errorf("a three-row pool has no background: %+v", bg)
	}
}

// A best hit the same number of spreads above the near misses is more distinct over a
// background that sits high (a semantic model's, unrelated text near 0.3) than over one
// near 0 (the hash embedder's): the threshold moves with where the namespace's
// background sits, so the gate is not fitted to one embedder's scale.
func TestDistinctnessMovesWithTheBackground(t *testing.T) {
	low := background{Source: calibrationPool, Rows: 100, Median: 0.05, Spread: 0.07, Tenth: 0.19}
	high := background{Source: calibrationPool, Rows: 100, Median: 0.35, Spread: 0.07, Tenth: 0.47}
	// A spread and a quarter above the tenth row on each.
	in := func(bg background) verdictInput {
		s := settingsFor(true)
		s.MinDistinctness = 1.62
		return verdictInput{hits: 5, best: bg.Tenth + 1.25*bg.Spread, bg: bg, settings: s}
	}
	if got, gates := decide(in(low)); got != VerdictLowConfidence {
		t.Errorf("over a background near 0: %s, want %s (gates %+v)", got, VerdictLowConfidence, gates)
	}
	if got, gates := decide(in(high)); got != VerdictOK {
		t.Errorf("over a background near 0.35: %s, want ok (gates %+v)", got, gates)
	}
}

func settingsFor(adaptive bool) retrievalSettings {
	return retrievalSettings{MinScore: 0.3, MinDistinctness: 1.25, Adaptive: adaptive, Grounding: retrieval.GroundingAbstain}
}

func TestVerdictGatesInOrder(t *testing.T) {
	calibrated := poolBackground(background40(0.8))
	cases := []struct {
		name string
		in   verdictInput
		want Verdict
	}{
		{"no hits", verdictInput{hits: 0, settings: settingsFor(true)}, VerdictNoMatch},
		{"an answer", verdictInput{hits: 5, best: 0.8, bg: calibrated, settings: settingsFor(true)}, VerdictOK},
		{"a near miss", verdictInput{hits: 5, best: 0.31, bg: calibrated, settings: settingsFor(true)}, VerdictLowConfidence},
		{"below the background's median", verdictInput{hits: 5, best: 0.15, bg: calibrated, settings: settingsFor(true)}, VerdictBelowThreshold},
		// Without a background the scalar floor judges, as before calibration.
		{"fallback, weak", verdictInput{hits: 5, best: 0.25, bg: background{Source: calibrationFallback}, settings: settingsFor(true)}, VerdictBelowThreshold},
		{"fallback, strong", verdictInput{hits: 5, best: 0.35, bg: background{Source: calibrationFallback}, settings: settingsFor(true)}, VerdictOK},
		{"adaptive off", verdictInput{hits: 5, best: 0.31, bg: calibrated, settings: settingsFor(false)}, VerdictOK},
		{"ungrounded", verdictInput{hits: 5, best: 0.8, bg: calibrated, settings: settingsFor(true),
			grounding: grounding{Setting: retrieval.GroundingAbstain, Missing: []string{"INC-9999"}}}, VerdictUngrounded},
		{"annotated", verdictInput{hits: 5, best: 0.8, bg: calibrated, settings: settingsFor(true),
			grounding: grounding{Setting: retrieval.GroundingAnnotate, Missing: []string{"INC-9999"}}}, VerdictOK},
	}
	for _, c := range cases {
		if c.in.grounding.Setting == "" {
			c.in.grounding.Setting = retrieval.GroundingAbstain
		}
		got, gates := decide(c.in)
		if got != c.want {
			t.Errorf("%s: %s, want %s (gates %+v)", c.name, got, c.want, gates)
		}
	}
	// A floor a layer set is the floor, background or not; min_distinctness 0 turns the gate off.
	s := settingsFor(true)
	s.MinScore, s.MinScoreSet, s.MinDistinctness = 0.5, true, 0
	if got, _ := decide(verdictInput{hits: 5, best: 0.4, bg: calibrated, settings: s}); got != VerdictBelowThreshold {
		t.Errorf("a set min_score: %s", got)
	}
	if got, _ := decide(verdictInput{hits: 5, best: 0.6, bg: calibrated, settings: s}); got != VerdictOK {
		t.Errorf("min_distinctness 0: %s", got)
	}
}

// A near miss by distinctness whose question names an entity and asks something of
// it is judged by grounding: a hit naming the entity and stating what is asked answers
// it (the gate passes, waived by the attribute); without such a hit, or with an
// identifier missing, the gate abstains as before.
func TestGroundingDecidesWhereDistinctnessCannot(t *testing.T) {
	calibrated := poolBackground(background40(0.8))
	attr := func(found bool) grounding {
		return grounding{Setting: retrieval.GroundingAbstain, Attribute: &attributeGrounding{Terms: []string{"finish"}, Found: found,
			Basis: basisTerms, Effect: effectRisk}}
	}
	missing := attr(true)
	missing.Missing = []string{"Porto"}
	off := attr(true)
	off.Setting = retrieval.GroundingOff
	for _, c := range []struct {
		name   string
		g      grounding
		want   Verdict
		waived string
	}{
		{"attribute found", attr(true), VerdictOK, waivedByAttribute},
		{"attribute not found (a risk only)", attr(false), VerdictLowConfidence, ""},
		{"an identifier missing", missing, VerdictLowConfidence, ""},
		{"grounding off", off, VerdictLowConfidence, ""},
		{"no attribute asked, no hit holding the names together", grounding{Setting: retrieval.GroundingAbstain}, VerdictLowConfidence, ""},
		{"no attribute asked, the names together in a hit", grounding{Setting: retrieval.GroundingAbstain, heldTogether: true}, VerdictOK, waivedByIdentifiers},
	} {
		got, gates := decide(verdictInput{hits: 5, best: 0.31, bg: calibrated, settings: settingsFor(true), grounding: c.g})
		if got != c.want {
			t.Errorf("%s: %s, want %s (gates %+v)", c.name, got, c.want, gates)
		}
		for _, g := range gates {
			if g.Name == "distinctness" && (g.Waived != c.waived || g.Value >= g.Threshold) {
				t.Errorf("%s: distinctness gate %+v, want waived %q", c.name, g, c.waived)
			}
		}
	}
}

func TestRetrievalRiskFollowsTheGates(t *testing.T) {
	calibrated := poolBackground(background40(0.8))
	hits := []hitView{{Scores: map[string]float64{"fused": 0.9}}, {Scores: map[string]float64{"fused": 0.5}}}
	risk := func(in verdictInput) retrievalRisk {
		in.grounding.Setting = retrieval.GroundingAbstain
		_, gates := decide(in)
		return riskOf(in, gates, hits, 0, rerankOutcome{})
	}
	strong := risk(verdictInput{hits: 2, best: 0.8, bg: calibrated, settings: settingsFor(true)})
	near := risk(verdictInput{hits: 2, best: 0.31, bg: calibrated, settings: settingsFor(true)})
	missing := risk(verdictInput{hits: 2, best: 0.8, bg: calibrated, settings: settingsFor(true), grounding: grounding{Missing: []string{"X"}}})
	if strong.Level != "low" || near.Level != "high" || missing.Score < 0.9 {
		t.Errorf("risk: strong %+v, near %+v, missing %+v", strong, near, missing)
	}
	if strong.Components.Distinctness == nil || strong.Components.Calibration != calibrationPool {
		t.Errorf("components: %+v", strong.Components)
	}
}

func TestCalibrationSummary(t *testing.T) {
	nc := summarise([][2]float64{{0.1, 0.05}, {0.2, 0.04}, {0.15, 0.06}})
	if nc.searches != 3 || nc.median != 0.15 || nc.spread != 0.05 {
		t.Errorf("summary %+v", nc)
	}
}
