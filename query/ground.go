package query

import (
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/retrieval"
	"github.com/loomplane/loom/internal/text"
)

// grounding is what identifier grounding found of the query's identifiers in the
// served hits (LOOM_MEMORY_SEARCH_IDENTIFIER_GROUNDING, or the search's grounding
// setting): an identifier no hit holds is missing. When the query names entities and
// asks something of them, a hit naming an entity must also state what is asked, by
// meaning (attribute.go), or the attribute is missing (a question about a person the
// namespace knows, on a subject it never stored).
type grounding struct {
	Setting     string       `json:"setting"`
	Identifiers []identifier `json:"identifiers"`
	Missing     []string     `json:"missing"`
	// Attribute is what the query asks of its entities, when it names some.
	Attribute *attributeGrounding `json:"attribute,omitempty"`
	// heldTogether: the query names two or more identifiers and asks nothing else of
	// them (no attribute terms), and one hit holds them all.
	heldTogether bool
}

// ungrounded reports whether grounding abstains the search.
func (g grounding) ungrounded() bool {
	return g.Setting == retrieval.GroundingAbstain && (len(g.Missing) > 0 || g.Attribute.abstains())
}

// confirmation says what grounding found of what the question asks, "" when it found
// nothing of it: every identifier held, and the attribute stated by a hit naming the
// question's entity ("attribute"), or, when the question asks nothing beyond its names
// ("when did Kwame get back from Lisbon?"), one hit holding two or more of them together
// ("identifiers"; a single name is every row about it).
func (g grounding) confirmation() string {
	switch {
	case g.Setting == retrieval.GroundingOff || len(g.Missing) > 0:
		return ""
	case g.Attribute != nil && g.Attribute.Found:
		return waivedByAttribute
	case g.Attribute == nil && g.heldTogether:
		return waivedByIdentifiers
	}
	return ""
}

// fold lower-cases and strips diacritics, so "Krakow" finds "Kraków".
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Mn, r) {
			return -1
		}
		return r
	}, norm.NFD.String(strings.ToLower(s)))
}

// groundWords are a text's words as grounding compares them: folded, with the "s"
// of a possessive dropped.
func groundWords(s string) []string {
	var out []string
	for _, w := range text.Words(fold(s)) {
		if w != "s" {
			out = append(out, w)
		}
	}
	return out
}

// hitText is what grounding reads of a hit: its key and its value's text.
func hitText(h *hitView) []string {
	return groundWords(memrow.KeyWords(h.MemoryKey) + " " + h.MemoryKey + " " + memrow.ValueText(h.Value))
}

// holds reports whether a hit's words hold an identifier: a name's words all (in any
// order: "Lotte de Vries" is "de Vries, Lotte" too), a code, number or quoted
// phrase's words in sequence.
func holds(words []string, id identifier) bool {
	want := groundWords(id.Text)
	if len(want) == 0 {
		return true
	}
	if id.Kind == identName {
		for _, w := range want {
			if !slices.Contains(nameParticles, w) && !slices.Contains(words, w) {
				return false
			}
		}
		return true
	}
	for i := 0; i+len(want) <= len(words); i++ {
		if slices.Equal(words[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// ground checks the plan's identifiers and attribute against the served hits.
func ground(setting string, plan queryPlan, hits []hitView) grounding {
	g := grounding{Setting: setting, Identifiers: plan.Identifiers, Missing: []string{}}
	if setting == retrieval.GroundingOff || len(hits) == 0 {
		return g
	}
	texts := make([][]string, len(hits))
	for i := range hits {
		texts[i] = hitText(&hits[i])
	}
	for _, id := range plan.Identifiers {
		found := false
		for _, t := range texts {
			if holds(t, id) {
				found = true
				break
			}
		}
		if !found {
			g.Missing = append(g.Missing, id.Text)
		}
	}
	// The attribute is judged for a single question: the parts of a multi-part one
	// spread its terms over several answers.
	if len(plan.Entities) > 0 && len(plan.AttributeTerms) > 0 && len(g.Missing) == 0 && len(plan.SubQueries) < 2 {
		g.Attribute = judgeAttributeTerms(plan, texts)
	}
	if len(plan.Identifiers) >= 2 && len(plan.AttributeTerms) == 0 && len(g.Missing) == 0 {
		g.heldTogether = slices.ContainsFunc(texts, func(t []string) bool {
			return !slices.ContainsFunc(plan.Identifiers, func(id identifier) bool { return !holds(t, id) })
		})
	}
	return g
}

// namesEntity reports whether a hit speaks of one of the entities: holds a word of its
// name (rows about a person often call her by her first name alone).
func namesEntity(words []string, entities []string) bool {
	for _, e := range entities {
		for _, w := range groundWords(e) {
			if !slices.Contains(nameParticles, w) && slices.Contains(words, w) {
				return true
			}
		}
	}
	return false
}

// prefixMatch lets a word match its longer or shorter forms a light stemmer leaves
// apart ("allergic" and "allergy" share "allerg"): five letters in common at least.
func prefixMatch(terms []string, want string) bool {
	if len([]rune(want)) < 5 {
		return false
	}
	stem := string([]rune(want)[:5])
	for _, t := range terms {
		if strings.HasPrefix(t, stem) {
			return true
		}
	}
	return false
}

// pinned marks the hits that hold one of the query's exact identifiers (a code, a
// number, a quoted phrase): a reranker leaves them in their slots.
func pinned(plan queryPlan, hits []hitView) []bool {
	out := make([]bool, len(hits))
	var ids []identifier
	for _, id := range plan.Identifiers {
		if id.pins() {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return out
	}
	for i := range hits {
		t := hitText(&hits[i])
		for _, id := range ids {
			if holds(t, id) {
				out[i] = true
			}
		}
	}
	return out
}
