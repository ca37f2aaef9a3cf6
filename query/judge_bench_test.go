package query

import (
	"testing"

	"github.com/loomplane/loom/internal/retrieval"
)

// BenchmarkPlanGroundDecide is what the planner, grounding and the gates cost a
// search beside its legs: a conversation question over a page of ten turns.
func BenchmarkPlanGroundDecide(b *testing.B) {
	hits := make([]hitView, 0, 10)
	for _, v := range []string{
		"Kwame: Home since yesterday after five days in Lisbon. We went on a boat tour, and the grilled sardines were incredible.",
		"Kwame: I finally fixed the leaking tap in the bathroom.",
		"Kwame: My cousin Ingrid is staying with us for a couple of weeks while job hunting, it's chaos but fun.",
		"Kwame: I tried a new podcast about space, it's addictive.",
		"Sofia: My plants are all dying, I have no idea why.",
		"Kwame: Yes! Let's plan something next month.",
		"Sofia: Same here, nothing exciting.",
		"Kwame: That's hilarious.",
		"Sofia: The new café on our street is overpriced but cosy.",
		"Kwame: The weather has been awful, it rained all week.",
	} {
		hits = append(hits, hitOf("k", v))
	}
	bg := poolBackground(background40(0.8))
	settings := settingsFor(true)
	b.ReportAllocs()
	for b.Loop() {
		for _, q := range []string{"When did Kwame get back from Lisbon?", "What was the Peruvian restaurant Sofia mentioned last week?",
			"Which city did Kwame's cousin move to?"} {
			plan := planQuery(q, planNow)
			g := ground(retrieval.GroundingAbstain, plan, hits)
			decide(verdictInput{hits: len(hits), best: 0.31, bg: bg, settings: settings, grounding: g})
		}
	}
}
