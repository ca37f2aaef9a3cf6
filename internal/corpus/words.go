package corpus

import (
	"math/rand/v2"
	"strings"
)

// Words is a vocabulary of made-up syllable words (2,048): values drawn from it are
// not each other's peers (no shared real words, few shared trigrams), so a write is
// judged against its namespace and found new, and a benchmark of memory.set measures
// the write path rather than a pile-up of conflict copies. `loomd bench`'s search
// corpus is drawn from it, and the search index's recall is measured on the same draw.
var Words = func() []string {
	syll := []string{"ka", "lo", "mi", "ru", "te", "zan", "pol", "dre", "vu", "sho", "ne", "gri", "ta", "bel", "quo", "fi"}
	var out []string
	for _, a := range syll {
		for _, b := range syll {
			for _, c := range syll[:8] {
				out = append(out, a+b+c)
			}
		}
	}
	return out
}()

// Sentence is ten words of Words.
func Sentence(rng *rand.Rand) string {
	w := make([]string, 10)
	for i := range w {
		w[i] = Words[rng.IntN(len(Words))]
	}
	return strings.Join(w, " ")
}
