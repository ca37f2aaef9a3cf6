package quality

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/loomplane/loom/internal/text"
)

// The semantic-style scripted embedder, shared by HyDE's measurement (hyde_test.go)
// and the abstain gates' (gates_test.go). It spreads its
// similarities as a semantic model does, not as the built-in hash embedder: a word is
// the sum of its concept's vector and its own (semanticConcepts groups words of one
// meaning: spouse, partner, wife...), so paraphrases score high without sharing a word;
// function words count a quarter; and every text shares a common direction, so
// unrelated texts sit near 0.3 rather than 0 (the narrow, high band of a real model).
// The groups are general English, written from the facts and the tuning questions,
// never from the held-out ones.

const semanticDim = 256

// semanticConcepts are the scripted embedder's groups of words of one meaning.
var semanticConcepts = [][]string{
	{"partner", "spouse", "husband", "wife", "married", "marry", "wedding", "engaged", "boyfriend", "girlfriend", "relationship", "fiance"},
	{"lives", "live", "living", "based", "home", "hometown", "city", "town", "flat", "house", "moved", "moving", "relocated", "centre", "houseboat"},
	{"studying", "study", "learning", "learn", "course", "classes", "class", "degree", "phd", "master's", "university", "enrolled",
		"apprenticeship", "training", "retraining", "school", "law"},
	{"job", "work", "works", "career", "occupation", "profession", "nurse", "developer", "dentist", "pilot", "chef", "teaches", "architect",
		"coach", "surgeon", "firefighter", "carpenter", "violinist", "judge", "head", "repairs", "writes"},
	{"pet", "pets", "dog", "cat", "rabbit", "rabbits", "parrot", "tortoise", "bees", "retriever", "animal"},
	{"eat", "eats", "meat", "vegetarian", "food", "dish", "drink", "milk", "lactose", "gluten", "shellfish", "alcohol", "diet", "intolerant", "gelatin"},
	{"medical", "condition", "diabetes", "allergic", "illness", "health", "insulin", "penicillin"},
	{"car", "drives", "drive", "vehicle", "vespa", "tesla", "mini", "volvo", "commute", "ride", "rides", "motorbike", "office"},
	{"instrument", "violin", "cello", "bass", "music", "band", "choir", "sings", "orchestra", "symphony"},
	{"sport", "football", "team", "padel", "climbs", "surfs", "marathon", "supports", "follow", "game", "rovers"},
	{"languages", "language", "speaks", "speak", "fluent", "arabic", "french", "english"},
	{"son", "daughter", "daughters", "children", "kids", "child"},
	{"sister", "brother", "twin", "sibling", "cousin"},
}

var conceptOf = func() map[string]int {
	m := map[string]int{}
	for i, g := range semanticConcepts {
		for _, w := range g {
			m[w] = i
		}
	}
	return m
}()

// gaussian is a unit-variance random vector seeded by s.
func gaussian(s string) []float64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	r := rand.New(rand.NewPCG(h.Sum64(), 34))
	v := make([]float64, semanticDim)
	for i := range v {
		v[i] = r.NormFloat64() / math.Sqrt(semanticDim)
	}
	return v
}

var semanticCommon = gaussian("\x00common")

// semanticVector is the scripted embedder: each word its concept's vector and its
// own, a function word at a quarter, plus the common direction at 0.65 of the
// content's length; unit length.
func semanticVector(s string, dim int) []float64 {
	v := make([]float64, dim)
	for _, w := range text.Words(strings.ToLower(s)) {
		w = strings.TrimSuffix(strings.TrimSuffix(w, "'s"), "’s")
		weight := 1.0
		if text.Stopword(w) {
			weight = 0.25
		}
		own := gaussian(w)
		for i := range v {
			v[i] += weight * 0.6 * own[i%semanticDim]
		}
		if g, ok := conceptOf[w]; ok {
			c := gaussian(fmt.Sprint("\x00concept", g))
			for i := range v {
				v[i] += weight * 0.8 * c[i%semanticDim]
			}
		}
	}
	norm := vnorm(v)
	for i := range v {
		v[i] += 0.65 * norm * semanticCommon[i%semanticDim] / vnorm(semanticCommon)
	}
	n := vnorm(v)
	if n == 0 {
		v[0] = 1
		return v
	}
	for i := range v {
		v[i] /= n
	}
	return v
}

func vnorm(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}
