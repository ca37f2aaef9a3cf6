package text

import (
	"strings"
	"unicode"
)

// ContentWords are a text's words that carry meaning (no stopwords), split into the
// values (words with a digit: numbers, dates, versions) and the rest, stemmed.
func ContentWords(s string) (plain, values map[string]bool) {
	plain, values = map[string]bool{}, map[string]bool{}
	for _, w := range Words(s) {
		switch {
		case strings.IndexFunc(w, unicode.IsDigit) >= 0:
			values[w] = true
		case !Stopword(w):
			plain[Stem(w)] = true
		}
	}
	return plain, values
}

// Subset reports whether every word of a is in b.
func Subset(a, b map[string]bool) bool {
	for w := range a {
		if !b[w] {
			return false
		}
	}
	return true
}
