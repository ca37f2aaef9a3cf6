package text

import (
	"strings"
	"sync"
)

// Stems remembers the stems it computed: a replay indexes millions of texts over a
// vocabulary of some thousands of words, and the Snowball stemmer (a rune slice and
// a suffix search per word) was most of what indexing a text cost. Safe for
// concurrent use; past limit words it forgets them all and starts again.
type Stems struct {
	mu    sync.Mutex
	stems map[string]string
	limit int
}

// NewStems returns a memo of Stem holding at most limit words.
func NewStems(limit int) *Stems {
	return &Stems{stems: map[string]string{}, limit: max(limit, 1)}
}

// Terms is the package's Terms, through the memo.
func (m *Stems) Terms(s string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return terms(s, m.stem)
}

// TermFreqs is the package's TermFreqs, through the memo.
func (m *Stems) TermFreqs(s string) ([]string, []uint16, uint32) {
	return termFreqs(m.Terms(s))
}

// stem is Stem remembered; holding mu.
func (m *Stems) stem(w string) string {
	if st, ok := m.stems[w]; ok {
		return st
	}
	// w shares the bytes of the whole lower-cased text it came from (and so may its
	// stem, when it is w): what is kept is a copy.
	w = strings.Clone(w)
	if !stemmable(w) {
		// Not remembered: it is its own stem, and such words (a key's "k1234", ids,
		// numbers) are often each used once, so the memo held one entry a memory.
		return w
	}
	st := Stem(w)
	if len(m.stems) >= m.limit {
		clear(m.stems)
	}
	m.stems[w] = st
	return st
}
