package query

import (
	"context"
	"slices"
	"strings"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/text"
)

// Attribute grounding decides whether a hit naming the query's entity states what
// the query asks of it, by meaning rather than by the question's wording: "the name
// of Priya's spouse" is answered by "Priya's partner is called Rafael", though no
// word is shared. Three readings, in order, each a basis the answer names:
//
//   - terms: the hit holds an asked term (Snowball stems, or a five-letter common
//     prefix: "allergic" and "allergy");
//   - related: the hit holds a word of the same kind of fact (factKinds: a spouse is
//     a partner, a city is where one lives, studying is learning);
//   - similarity: the embedder's cosine between the asked attribute and the hit,
//     against the namespace's calibration: a spread above the background median the
//     floor gate reads. Only an embedder whose similarities carry meaning is asked: the hash
//     embedder's only echo the words the first reading already compared.
//
// What a missing attribute does is its effect: abstain (the verdict is
// ungrounded_identifier, under grounding=abstain) when the search could judge it by
// meaning (a semantic embedder, or an asked word of a kind factKinds knows, so the
// hits were read for every way of saying it), and a risk component otherwise: an
// asked word nobody listed, under the hash embedder, is wording alone.
type attributeGrounding struct {
	Terms []string `json:"terms"`
	// Found is whether a hit naming one of the query's entities states the attribute.
	Found bool `json:"found"`
	// Basis is the reading that found it (terms, related, similarity), or none.
	Basis string `json:"basis"`
	// Matched is the hit's word that matched (terms, related).
	Matched string `json:"matched,omitempty"`
	// Similarity and Threshold are the similarity reading's, when it ran.
	Similarity *float64 `json:"similarity,omitempty"`
	Threshold  *float64 `json:"threshold,omitempty"`
	// Effect is abstain or risk: what a missing attribute does to the verdict.
	Effect string `json:"effect"`
	// Kinds are the kinds of fact the asked terms belong to.
	Kinds []string `json:"kinds"`
}

// Attribute bases and effects.
const (
	basisTerms      = "terms"
	basisRelated    = "related"
	basisSimilarity = "similarity"
	basisNone       = "none"
	effectAbstain   = "abstain"
	effectRisk      = "risk"
)

// missing reports whether the attribute was judged absent.
func (a *attributeGrounding) missing() bool { return a != nil && !a.Found }

// abstains reports whether a missing attribute abstains the search.
func (a *attributeGrounding) abstains() bool { return a.missing() && a.Effect == effectAbstain }

// factKinds are kinds of personal and working facts with the words that say them:
// an asked word of a kind is answered by a hit holding any word of that kind. The
// lists are general English, extended only from the tuning queries (the quality
// corpus's and the personal-facts corpus's tuning half), never for a held-out one.
var factKinds = map[string]string{
	"partner":   "partner spouse husband wife married marry marriage girlfriend boyfriend fiance fiancee engaged wedding wed relationship dating",
	"family":    "family kid kids child children son daughter sibling sister brother parent mother father mom mum dad cousin twin grandmother grandfather grandparent aunt uncle niece nephew",
	"home":      "live lives living home house flat apartment address city town country based reside resident located moved move relocated relocate neighbourhood neighborhood",
	"origin":    "origin originally from born birthplace hometown grew raised childhood native",
	"birth":     "born birthday birth age old",
	"work":      "job work works career profession occupation employer employed company role position living business trade teach teaches teacher",
	"study":     "study studies studying learn learning course class classes degree school university college student phd master masters research researching apprentice apprenticeship enrolled training retraining subject",
	"pet":       "pet pets dog puppy cat kitten rabbit parrot bird tortoise turtle hamster fish animal",
	"diet":      "eat eats food diet dish meal vegetarian vegan meat milk dairy drink drinks alcohol allergic allergy intolerant gluten lactose shellfish",
	"health":    "health medical condition illness disease diabetes allergy allergic medication medicine insulin penicillin",
	"care":      "doctor dentist gp physician therapist vet",
	"music":     "instrument music band play plays violin violinist cello guitar bass piano drums sing sings choir orchestra",
	"sport":     "sport sports play plays club football soccer tennis padel marathon race run running climb climbing surf gym training game match supports fan",
	"vehicle":   "car drive drives vehicle ride rides bike bicycle motorbike scooter vespa",
	"commute":   "commute journey travel trip train bus ride office",
	"language":  "language languages speak speaks fluent",
	"leisure":   "hobby hobbies free spare time weekend weekends pastime enjoy enjoys holiday holidays",
	"body":      "tall height weight blood eye eyes hair",
	"pay":       "salary pay paid wage wages income earn earns bonus",
	"money":     "budget cost costs money spend spending funding price",
	"capacity":  "desk desks seat seats capacity",
	"headcount": "headcount staff employees",
	"stock":     "stock ticker share shares listed exchange ipo",
}

// kindsOf maps a stem to the kinds it belongs to.
var kindsOf = func() map[string][]string {
	out := map[string][]string{}
	for kind, words := range factKinds {
		for _, w := range strings.Fields(words) {
			s := text.Stem(w)
			if !slices.Contains(out[s], kind) {
				out[s] = append(out[s], kind)
			}
		}
	}
	return out
}()

// wordsOf are the words of s, as written, whose stems are among terms.
func wordsOf(s string, terms []string) []string {
	var out []string
	for _, w := range text.Words(s) {
		if slices.Contains(terms, text.Stem(w)) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// judgeAttributeTerms is the first two readings over the hits that name an entity:
// an asked term or a word of an asked term's kind. texts are the hits' ground words.
func judgeAttributeTerms(plan queryPlan, texts [][]string) *attributeGrounding {
	a := &attributeGrounding{Terms: plan.AttributeTerms, Basis: basisNone, Effect: effectRisk, Kinds: []string{}}
	for _, t := range plan.AttributeTerms {
		for _, k := range kindsOf[t] {
			if !slices.Contains(a.Kinds, k) {
				a.Kinds = append(a.Kinds, k)
			}
		}
	}
	if len(a.Kinds) > 0 {
		a.Effect = effectAbstain
	}
	for _, t := range texts {
		if !namesEntity(t, plan.Entities) {
			continue
		}
		terms := text.Terms(strings.Join(t, " "))
		for _, want := range plan.AttributeTerms {
			if slices.Contains(terms, want) || prefixMatch(terms, want) {
				a.Found, a.Basis, a.Matched = true, basisTerms, want
				return a
			}
		}
		for _, term := range terms {
			for _, k := range kindsOf[term] {
				if slices.Contains(a.Kinds, k) {
					a.Found, a.Basis, a.Matched = true, basisRelated, term
					return a
				}
			}
		}
	}
	return a
}

// judgeAttributeSimilarity is the third reading: the embedder's cosine between the
// asked attribute (its words as the query wrote them) and each hit naming an entity,
// against the threshold the namespace's background sets (judge passes it). A semantic embedder's verdict
// is meaning, so it decides: a missing attribute abstains. A failed embedding leaves
// the reading out (the attribute stays as the terms judged it).
func (s *Service) judgeAttributeSimilarity(ctx context.Context, a *attributeGrounding, query string, plan queryPlan, hits []hitView, floor float64) {
	attributeBySimilarity(ctx, s.embedder, a, query, plan, hits, floor)
}

func attributeBySimilarity(ctx context.Context, e embed.Embedder, a *attributeGrounding, query string, plan queryPlan, hits []hitView, floor float64) {
	if a == nil || a.Found || embed.Lexical(e.Model()) {
		return
	}
	asked := strings.Join(wordsOf(query, plan.AttributeTerms), " ")
	in := []string{asked}
	for i := range hits {
		if t := hitText(&hits[i]); namesEntity(t, plan.Entities) {
			in = append(in, memrowText(&hits[i]))
		}
	}
	if asked == "" || len(in) == 1 {
		return
	}
	vecs, err := e.Embed(ctx, in)
	if err != nil || len(vecs) != len(in) {
		return
	}
	best := -1.0
	for _, v := range vecs[1:] {
		best = max(best, embed.Dot(vecs[0], v))
	}
	sim, th := round6(best), round6(floor)
	a.Similarity, a.Threshold, a.Effect = &sim, &th, effectAbstain
	if best >= floor {
		a.Found, a.Basis = true, basisSimilarity
	}
}

// memrowText is a hit's value as the embedder reads it.
func memrowText(h *hitView) string { return memrow.ValueText(h.Value) }
