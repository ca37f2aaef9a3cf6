package query

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkFitPack is the pure part of a pack's cost, its lines' counts kept from the first
// call on as they are between packs of the same facts: 10 facts and 5 changes of about
// 30 words each, counted and cut to a 1000-token budget with o200k_base.
func BenchmarkFitPack(b *testing.B) {
	tok, err := newTokenizers(packCountCache).For("o200k_base", "")
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	facts := packSection{Name: sectionFacts, Available: true}
	recent := packSection{Name: sectionRecent, Available: true}
	for i := range 10 {
		facts.Lines = append(facts.Lines, packLine{Cite: fmt.Sprintf("m:%036d@%d", i, 1796461775023992281+i), Text: randomText(r, 30), key: fmt.Sprint(i)})
	}
	for i := range 5 {
		recent.Lines = append(recent.Lines, packLine{Cite: fmt.Sprintf("m:%036d@%d", i+20, 1796461775023992281+i), Text: randomText(r, 30), key: fmt.Sprint(i)})
	}
	sections := []packSection{facts, recent}
	for b.Loop() {
		fitPack(sections, packLimits{Budget: 1000, PerKey: 2, PerSession: 12}, formatMarkdown, tok.Count)
	}
}
