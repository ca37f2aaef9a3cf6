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
	for _, c := range []struct {
		query           string
		found, abstains bool
	}{
		{"What languages does Ana Ribeiro speak?", true, false}, // a row calling her Ana holds it
		// No row about her says it; an asked word of no known kind is wording alone
		// under the hash embedder: a risk, not an abstain.
		{"What is Ana Ribeiro's shoe size?", false, false},
		{"When is Ana Ribeiro's birthday?", false, true}, // another person's row does not count
	} {
		g := ground(retrieval.GroundingAbstain, planQuery(c.query, planNow), hits)
		if g.Attribute == nil || g.Attribute.Found != c.found || g.ungrounded() != c.abstains {
			t.Errorf("%q: attribute %+v, want found %v, abstains %v", c.query, g.Attribute, c.found, c.abstains)
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

func TestGroundingReadsAParaphrasedAttributeByMeaning(t *testing.T) {
	hits := []hitView{
		hitOf("fact-001", "Priya's partner is called Rafael."),
		hitOf("fact-002", "Priya works as a pediatric nurse."),
		hitOf("fact-003", "Tomasz lives in Nairobi these days."),
		hitOf("fact-004", "Lars is learning to knit."),
	}
	for _, c := range []struct{ query, basis string }{
		{"What is the name of Priya's spouse?", basisRelated},
		{"Which city is Tomasz based in?", basisRelated},
		{"What is Lars studying?", basisRelated},
		{"What does Priya do for work?", basisTerms},
	} {
		g := ground(retrieval.GroundingAbstain, planQuery(c.query, planNow), hits)
		if g.ungrounded() || g.Attribute == nil || !g.Attribute.Found || g.Attribute.Basis != c.basis {
			t.Errorf("%q: attribute %+v, want found by %s", c.query, g.Attribute, c.basis)
		}
	}
	// A kind of fact no row about Priya states abstains: her rows were read for
	// every way of saying it.
	if g := ground(retrieval.GroundingAbstain, planQuery("Which car does Priya drive?", planNow), hits); !g.ungrounded() || g.Attribute.Effect != effectAbstain {
		t.Errorf("an absent kind of fact: %+v", g.Attribute)
	}
}

// A question of names alone is confirmed by a hit holding them together, not by hits
// holding one each (every row about Kwame holds "Kwame").
func TestGroundingReadsNamesHeldTogether(t *testing.T) {
	hits := []hitView{
		hitOf("t1", "Kwame: Home since yesterday after five days in Lisbon."),
		hitOf("t2", "Kwame: I finally fixed the leaking tap."),
		hitOf("t3", "Sofia: Lisbon was lovely in May."),
	}
	for _, c := range []struct {
		query string
		hits  []hitView
		want  string
	}{
		{"When did Kwame get back from Lisbon?", hits, waivedByIdentifiers},
		{"When did Kwame get back from Lisbon?", hits[1:], ""},
		{"What did Kwame fix?", hits, waivedByAttribute}, // an attribute asked: "fixed" states it
	} {
		g := ground(retrieval.GroundingAbstain, planQuery(c.query, planNow), c.hits)
		if got := g.confirmation(); got != c.want {
			t.Errorf("%q over %d hits: confirmation %q, want %q", c.query, len(c.hits), got, c.want)
		}
	}
}
