// Package text is how Loom reads words: the tokens, stopwords and stems the write
// side's verdict rules and the lexical search leg agree on.
package text

import (
	"slices"
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// Words splits text into lower-cased runs of letters and digits.
func Words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the and or but of to in on at by for with from as is are was were be been being
		has have had do does did it its this that these those there here i me my we our you your he him his she her they
		them their not no so very just also than then now what which who whom whose when where why how does about into
		over under again further once all any both each few more most other some such only own same can will would
		should could may might must shall`) {
		stopwords[w] = true
	}
}

// Stopword reports whether w carries no meaning of its own.
func Stopword(w string) bool { return stopwords[w] }

// Terms are the index terms of a text: its words, stopwords dropped, each stemmed.
func Terms(s string) []string { return terms(s, Stem) }

func terms(s string, stem func(string) string) []string {
	var out []string
	for _, w := range Words(s) {
		if stopwords[w] {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

// TermFreqs counts a text's index terms: each distinct term once, in term order, with
// its count (capped at 65535) and the text's length in terms. The lexical leg scores
// these, wherever it reads them from.
func TermFreqs(s string) ([]string, []uint16, uint32) { return termFreqs(terms(s, Stem)) }

func termFreqs(terms []string) ([]string, []uint16, uint32) {
	// Sorted, a text's few terms count as runs: no map to build.
	n := len(terms)
	if n == 0 {
		return []string{}, []uint16{}, 0
	}
	slices.Sort(terms)
	tfs := make([]uint16, 0, n)
	distinct := terms[:0]
	for i := 0; i < n; {
		j := i + 1
		for j < n && terms[j] == terms[i] {
			j++
		}
		distinct = append(distinct, terms[i])
		tfs = append(tfs, uint16(min(j-i, 65535)))
		i = j
	}
	return slices.Clip(distinct), tfs, uint32(n)
}

// Stem is a word's English Snowball (Porter2) stem, so inflections and derivations
// share a term ("researched", "researching" and "research" are "research"; "cities"
// and "city" are "citi"). It is the index's and the query's stemmer alike, and the
// ClickHouse projector's: a change to it needs a projection replay. A word with a
// digit, a non-ASCII letter or fewer than three letters is left as it is (codes,
// numbers and other scripts are matched as written).
func Stem(w string) string {
	if !stemmable(w) {
		return w
	}
	return english.Stem(w, true)
}

// stemmable: a word of three letters or more, a to z alone; Stem leaves any other as
// it is.
func stemmable(w string) bool {
	if len(w) < 3 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// Chunking: a value longer than ChunkThreshold runes is also searched by windows of
// about ChunkSize runes, overlapping by ChunkOverlap, at most MaxChunks of them, cut
// at word boundaries. The write side embeds the chunks and the projector stores them;
// both cut with this function, so they agree on every window.
const (
	ChunkThreshold = 1200
	ChunkSize      = 600
	ChunkOverlap   = 100
	MaxChunks      = 16
)

// Chunks cuts a long text into windows; a text at or under the threshold has none.
func Chunks(s string) []string {
	r := []rune(s)
	if len(r) <= ChunkThreshold {
		return nil
	}
	var out []string
	for start := 0; start < len(r) && len(out) < MaxChunks; {
		end := min(start+ChunkSize, len(r))
		if end < len(r) {
			// back up to a word boundary, if one is near
			for b := end; b > start+ChunkSize/2; b-- {
				if unicode.IsSpace(r[b]) {
					end = b
					break
				}
			}
		}
		out = append(out, strings.TrimSpace(string(r[start:end])))
		if end == len(r) {
			break
		}
		next := end - ChunkOverlap
		for next > start && next < end && !unicode.IsSpace(r[next]) {
			next--
		}
		if next <= start {
			next = end
		}
		start = next
	}
	return out
}
