// Package index is the knowledge plane's in-process search index: the chunks of every
// namespace's documents, fed from the change topic by its own follower (follow.go),
// apart from memory's search index (internal/searchindex), so a memory search never
// meets a knowledge chunk. It holds each source's chunks of its latest written
// version, with their terms (Okapi BM25) and vectors, and answers a candidate pool
// that knowledge.search checks against the heads in Postgres before it ranks.
package index

import (
	"context"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/text"
)

// Chunk is one indexed chunk of a source's version.
type Chunk struct {
	SourceURI   string
	DocID       string
	Version     int64
	Seq         int64 // the record that wrote it
	Ordinal     int
	HeadingPath []string
	Kind, Text  string
	Title       string
	Format      string
	Tags        []string
	vec         []float32
	tfs         map[string]uint16
	length      int
}

type source struct {
	chunks  []*Chunk
	deleted bool
}

type space struct {
	sources  map[string]*source
	df       map[string]int // chunks holding each term
	chunks   int
	totalLen int
	pos      int64 // the highest seq of the namespace applied
}

func newSpace() *space { return &space{sources: map[string]*source{}, df: map[string]int{}} }

func (s *space) drop(src *source) {
	for _, c := range src.chunks {
		for t := range c.tfs {
			if s.df[t]--; s.df[t] <= 0 {
				delete(s.df, t)
			}
		}
		s.chunks--
		s.totalLen -= c.length
	}
	src.chunks = nil
}

// Index is the chunk index of every namespace a process serves.
type Index struct {
	mu     sync.RWMutex
	spaces map[[2]string]*space
	moved  chan struct{} // closed when a position moves
}

// New returns an empty index.
func New() *Index { return &Index{spaces: map[[2]string]*space{}, moved: make(chan struct{})} }

func (x *Index) space(org, ns string) *space {
	k := [2]string{org, ns}
	s := x.spaces[k]
	if s == nil {
		s = newSpace()
		x.spaces[k] = s
	}
	return s
}

// op is one record's change to the index, in topic order.
type op struct {
	org, ns string
	seq     int64
	env     *events.Envelope
	content *events.DocumentContent // nil: the record's key is gone (erased)
	fence   bool                    // a namespace's erasure: everything below seq goes
}

// apply applies ops in order and wakes the waiters of positions that moved.
func (x *Index) apply(ops []op) {
	if len(ops) == 0 {
		return
	}
	x.mu.Lock()
	for _, o := range ops {
		s := x.space(o.org, o.ns)
		s.pos = max(s.pos, o.seq)
		switch {
		case o.fence:
			for uri, src := range s.sources {
				if len(src.chunks) == 0 || src.chunks[0].Seq < o.seq {
					s.drop(src)
					delete(s.sources, uri)
				}
			}
		case o.env != nil && o.content != nil:
			applyDocument(s, o.env, o.content)
		}
	}
	close(x.moved)
	x.moved = make(chan struct{})
	x.mu.Unlock()
}

func applyDocument(s *space, env *events.Envelope, c *events.DocumentContent) {
	d := env.Document
	src := s.sources[c.SourceURI]
	if src == nil {
		src = &source{}
		s.sources[c.SourceURI] = src
	}
	switch env.Type {
	case events.TypeDocumentDeleted:
		src.deleted = true
		return
	case events.TypeDocumentRestored:
		src.deleted = false
		return
	}
	if len(src.chunks) > 0 && src.chunks[0].Version >= d.Version {
		return // a replay of an older version
	}
	s.drop(src)
	src.deleted = false
	for _, ch := range c.Chunks {
		terms, tfs, n := text.TermFreqs(ch.Text)
		k := &Chunk{SourceURI: c.SourceURI, DocID: d.DocID, Version: d.Version, Seq: env.Seq, Ordinal: ch.Ordinal,
			HeadingPath: ch.HeadingPath, Kind: ch.Kind, Text: ch.Text, Title: c.Title, Format: d.Format, Tags: c.Tags,
			vec: ch.Embedding, tfs: make(map[string]uint16, len(terms)), length: int(n)}
		for i, t := range terms {
			k.tfs[t] = tfs[i]
			s.df[t]++
		}
		s.chunks++
		s.totalLen += k.length
		src.chunks = append(src.chunks, k)
	}
}

// Position is the highest seq of a namespace the index has applied.
func (x *Index) Position(org, ns string) int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if s := x.spaces[[2]string{org, ns}]; s != nil {
		return s.pos
	}
	return 0
}

// WaitFor waits until the index has applied a namespace's records up to gen, or ctx
// ends (its error then).
func (x *Index) WaitFor(ctx context.Context, org, ns string, gen int64) error {
	for {
		x.mu.RLock()
		pos := int64(0)
		if s := x.spaces[[2]string{org, ns}]; s != nil {
			pos = s.pos
		}
		moved := x.moved
		x.mu.RUnlock()
		if pos >= gen {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Filter narrows a search's chunks.
type Filter struct {
	SourcePrefix string
	Formats      []string // any of them; none: every format
	Tags         []string // every one of them
}

func (f Filter) match(c *Chunk) bool {
	if !strings.HasPrefix(c.SourceURI, f.SourcePrefix) {
		return false
	}
	if len(f.Formats) > 0 && !slices.Contains(f.Formats, c.Format) {
		return false
	}
	for _, t := range f.Tags {
		if !slices.Contains(c.Tags, t) {
			return false
		}
	}
	return true
}

// Candidate is a chunk a search found, with its legs' scores and its fused score.
type Candidate struct {
	*Chunk
	Score   float64 // reciprocal rank fusion of the legs
	Lexical float64 // BM25; 0 when the lexical leg missed it
	Vector  float64 // cosine; 0 when no vector
}

// rrfK is the reciprocal rank fusion constant.
const rrfK = 60

// Search answers up to depth candidates of a namespace: the lexical leg (BM25 over the
// query's terms) and the vector leg (cosine to vec, when given), fused by reciprocal
// rank. Deleted sources' chunks are left out here too; the heads are the authority.
func (x *Index) Search(org, ns, query string, vec []float32, f Filter, depth int) []Candidate {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := x.spaces[[2]string{org, ns}]
	if s == nil || s.chunks == 0 {
		return nil
	}
	terms := text.Terms(query)
	avg := float64(s.totalLen) / float64(max(s.chunks, 1))
	var all []*Candidate
	for _, src := range s.sources {
		if src.deleted {
			continue
		}
		for _, c := range src.chunks {
			if !f.match(c) {
				continue
			}
			cand := &Candidate{Chunk: c}
			for _, t := range terms {
				tf := float64(c.tfs[t])
				if tf == 0 {
					continue
				}
				df := float64(s.df[t])
				idf := math.Log(1 + (float64(s.chunks)-df+0.5)/(df+0.5))
				const k1, b = 1.2, 0.75
				cand.Lexical += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*float64(c.length)/max(avg, 1)))
			}
			if len(vec) > 0 && len(vec) == len(c.vec) {
				var dot float32
				for i := range vec {
					dot += vec[i] * c.vec[i]
				}
				cand.Vector = float64(dot)
			}
			all = append(all, cand)
		}
	}
	fuse(all, func(c *Candidate) float64 { return c.Lexical })
	if len(vec) > 0 {
		fuse(all, func(c *Candidate) float64 { return c.Vector })
	}
	var out []Candidate
	for _, c := range all {
		if c.Score > 0 {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		if out[i].SourceURI != out[j].SourceURI {
			return out[i].SourceURI < out[j].SourceURI
		}
		return out[i].Ordinal < out[j].Ordinal
	})
	if len(out) > depth {
		out = out[:depth]
	}
	return out
}

// fuse adds each candidate's reciprocal rank under score to its fused score;
// a candidate scoring 0 or less has no rank in that leg.
func fuse(all []*Candidate, score func(*Candidate) float64) {
	ranked := make([]*Candidate, 0, len(all))
	for _, c := range all {
		if score(c) > 0 {
			ranked = append(ranked, c)
		}
	}
	sort.SliceStable(ranked, func(i, j int) bool { return score(ranked[i]) > score(ranked[j]) })
	for r, c := range ranked {
		c.Score += 1 / float64(rrfK+r+1)
	}
}
