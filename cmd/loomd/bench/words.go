package bench

import (
	"math/rand/v2"
	"strings"
)

// words is a vocabulary of made-up syllable words: values drawn from it are not each
// other's peers (no shared real words, few shared trigrams), so a write is judged
// against its namespace and found new, and a benchmark of memory.set measures the
// write path rather than a pile-up of conflict copies.
var words = func() []string {
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

// sentence is ten words of the vocabulary.
func sentence(rng *rand.Rand) string {
	w := make([]string, 10)
	for i := range w {
		w[i] = words[rng.IntN(len(words))]
	}
	return strings.Join(w, " ")
}
