package query

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/loomplane/loom/internal/retrieval"
)

func hitOf(key, value string) hitView {
	v, _ := json.Marshal(value)
	return hitView{memoryView: memoryView{MemoryKey: key, Value: v}, Scores: map[string]float64{}}
}

func TestGroundingFindsWhatNoHitHolds(t *testing.T) {
	hits := []hitView{
		hitOf("office.krakow.wifi", "Kraków staff use TW-Krakow with certificate login."),
		hitOf("person.lotte-de-vries.role", "Lotte de Vries is the co-founder and chief executive officer of Tidewell."),
		hitOf("incident.inc-2317", "INC-2317: a firmware release bricked 40 gateways."),
	}
	cases := []struct {
		query   string
		missing []string
	}{
		{"What is the wifi at the Krakow office?", nil}, // diacritics folded
		{"What does de Vries, Lotte do?", nil},          // a name's words in any order
		{"What went wrong in INC-2317?", nil},
		{"What happened in INC-9999?", []string{"INC-9999"}},
		{"What is the wifi at the Berlin office?", []string{"Berlin"}},
		{"Who does Lotte Jansen report to?", []string{"Lotte Jansen"}}, // every word of a name
	}
	for _, c := range cases {
		g := ground(retrieval.GroundingAbstain, planQuery(c.query, planNow), hits)
		if !slices.Equal(g.Missing, c.missing) && !(len(c.missing) == 0 && len(g.Missing) == 0) {
			t.Errorf("%q: missing %v, want %v", c.query, g.Missing, c.missing)
		}
		if g.ungrounded() != (len(c.missing) > 0) {
			t.Errorf("%q: ungrounded %v", c.query, g.ungrounded())
		}
	}
	// annotate names them and lets the verdict stand; off looks for nothing.
	p := planQuery("What happened in INC-9999?", planNow)
	if g := ground(retrieval.GroundingAnnotate, p, hits); g.ungrounded() || len(g.Missing) != 1 {
		t.Errorf("annotate: %+v", g)
	}
	if g := ground(retrieval.GroundingOff, p, hits); len(g.Missing) != 0 {
		t.Errorf("off: %+v", g)
	}
}

func TestGroundingJudgesTheAttributeOfANamedEntity(t *testing.T) {
	hits := []hitView{
		hitOf("person.ana-ribeiro.office", "Ana Ribeiro works out of Porto."),
		hitOf("person.ana-ribeiro.languages", "Ana speaks Portuguese, English and some German."),
		hitOf("person.mei-lin-chua.birthday", "Mei Lin's birthday is on 17 August."),
	}
	for q, found := range map[string]bool{
		"What languages does Ana Ribeiro speak?": true,  // a row calling her Ana holds it
		"What is Ana Ribeiro's shoe size?":       false, // no row about her does
		"When is Ana Ribeiro's birthday?":        false, // another person's row does not count
	} {
		g := ground(retrieval.GroundingAbstain, planQuery(q, planNow), hits)
		if g.Attribute == nil || g.Attribute.Found != found || g.ungrounded() == found {
			t.Errorf("%q: attribute %+v, want found %v", q, g.Attribute, found)
		}
	}
	// The parts of a multi-part question spread their terms: no attribute judged.
	if g := ground(retrieval.GroundingAbstain, planQuery("Where is Ana Ribeiro based and what is her shoe size?", planNow), hits); g.Attribute != nil {
		t.Errorf("multi-part question: attribute %+v", g.Attribute)
	}
}

func TestPinnedHitsHoldAnExactIdentifier(t *testing.T) {
	hits := []hitView{hitOf("a", "Lotte de Vries approved TW-1042"), hitOf("b", "Lotte de Vries runs the company"), hitOf("c", "tw 1042 is unrelated")}
	got := pinned(planQuery("What did Lotte de Vries decide about TW-1042?", planNow), hits)
	if !slices.Equal(got, []bool{true, false, true}) {
		t.Errorf("pinned %v: a code pins, a name does not", got)
	}
}
