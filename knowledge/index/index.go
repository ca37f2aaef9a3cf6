// Package index is the knowledge plane's in-process search index: the chunks of every
// namespace's documents, fed from the change topic by its own follower (follow.go),
// apart from memory's search index (internal/searchindex), so a memory search never
// meets a knowledge chunk. It holds each source's chunks of its latest written
// version, with their terms (Okapi BM25) and vectors, and answers a candidate pool
// that knowledge.search checks against the heads in Postgres before it ranks.
//
// Its vector leg ranks as memory search's does (internal/hnsw): an exact scan below
// Config.GraphMin vectors, and past it an HNSW graph over the vectors' int8 codes,
// built in the background (vectors.go), with the filter applied during the walk, the
// chunks written since the build scanned exactly beside it, and exact scanning whenever
// a filter leaves few chunks.
package index

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/text"
	"github.com/loomplane/loom/knowledge/store"
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
	UserID      string    // the document's user ("" the namespace's)
	UpdatedAt   time.Time // when its version was written
	vec         []float32
	tfs         map[string]uint16
	length      int
	src         *source
	gone        bool  // dropped: still in postings until they are compacted
	row         int32 // its vector's row in its arena, -1 for none
	slot        int32 // its place in the space's slots, which its postings name
}

type source struct {
	chunks  []*Chunk
	deleted bool
	userRef string // the topic's reference of the document's user ("" none): a user's erasure drops it
	refGen  int    // the generation of the org's user reference key userRef is under (ce_loomrefgen)
}

type space struct {
	sources map[string]*source
	df      map[string]int      // chunks holding each term
	post    map[string]*posting // the chunks holding each term
	// slots are the chunks by slot, nil where one was dropped; lens their lengths.
	// The lexical leg sums a slot's score from its postings alone, reading no chunk
	// until it has every score (search.go).
	slots []*Chunk
	lens  []uint32
	// deleted is, by slot, whether the chunk's source is deleted (source.deleted), so
	// that an unfiltered lexical leg keeps or passes a slot without reading its chunk.
	deleted  []bool
	deadSlot int
	chunks   int
	totalLen int
	pos      int64          // the highest seq of the namespace applied
	arenas   map[int]*arena // the chunk vectors by size
}

// posting is the chunks holding a term, by slot with the term's count in each,
// dropped ones included until they are more than half of it, so dropping a chunk does
// not scan every posting it is in.
type posting struct {
	entries []entry
	gone    int
}

type entry struct {
	slot int32
	tf   uint16
}

func newSpace() *space {
	return &space{sources: map[string]*source{}, df: map[string]int{}, post: map[string]*posting{}, arenas: map[int]*arena{}}
}

func (s *space) drop(src *source) {
	for _, c := range src.chunks {
		c.gone = true
		s.dropVector(c)
		s.slots[c.slot] = nil
		s.deadSlot++
		for t := range c.tfs {
			if s.df[t]--; s.df[t] <= 0 {
				delete(s.df, t)
				delete(s.post, t)
				continue
			}
			p := s.post[t]
			if p.gone++; 2*p.gone > len(p.entries) {
				p.entries = slices.DeleteFunc(p.entries, func(e entry) bool { return s.slots[e.slot] == nil })
				p.gone = 0
			}
		}
		s.chunks--
		s.totalLen -= c.length
	}
	src.chunks = nil
	if s.deadSlot > 1024 && s.deadSlot > len(s.slots)-s.deadSlot {
		s.renumber()
	}
}

// renumber gives the live chunks consecutive slots and rewrites the postings to them,
// once dropped chunks hold most of the slots.
func (s *space) renumber() {
	to := make([]int32, len(s.slots))
	live := len(s.slots) - s.deadSlot
	slots, lens, deleted := make([]*Chunk, 0, live), make([]uint32, 0, live), make([]bool, 0, live)
	for i, c := range s.slots {
		to[i] = -1
		if c != nil {
			to[i] = int32(len(slots))
			c.slot = to[i]
			slots, lens, deleted = append(slots, c), append(lens, s.lens[i]), append(deleted, s.deleted[i])
		}
	}
	for _, p := range s.post {
		kept := p.entries[:0]
		for _, e := range p.entries {
			if n := to[e.slot]; n >= 0 {
				kept = append(kept, entry{n, e.tf})
			}
		}
		p.entries, p.gone = kept, 0
	}
	s.slots, s.lens, s.deleted, s.deadSlot = slots, lens, deleted, 0
}

// Index is the chunk index of every namespace a process serves.
type Index struct {
	cfg    Config
	mu     sync.RWMutex
	spaces map[[2]string]*space
	moved  chan struct{} // closed when a position moves
	// waiting counts the searches waiting for a position; wanted wakes a resting
	// follower when one starts waiting (follow_rest.go).
	waiting atomic.Int64
	wanted  chan struct{}
	// scratch holds searches' leg buffers (*legs) between searches
	scratch sync.Pool
	// stems remembers the Snowball stems of the chunks' words: stemming each word of
	// each chunk anew was most of what applying a document cost (as it was for
	// memory's index, internal/searchindex).
	stems *text.Stems

	builds   sync.WaitGroup
	buildSem chan struct{} // one graph build at a time
	closed   chan struct{}
	close    sync.Once
}

// stemMemo is how many words the index's stem memo holds before it starts again.
const stemMemo = 1 << 16

// New returns an empty index.
func New(cfg Config) *Index {
	return &Index{cfg: cfg.withDefaults(), spaces: map[[2]string]*space{}, moved: make(chan struct{}), wanted: make(chan struct{}, 1),
		buildSem: make(chan struct{}, 1), closed: make(chan struct{}), stems: text.NewStems(stemMemo)}
}

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
	fence   bool                    // an erasure: everything below seq goes (of userRef's, when set)
	userRef string                  // a user's erasure: the user's reference
	refGen  int                     // the generation of the key the record's references are under
	live    map[string]bool         // a user's erasure: the namespace's sources whose heads are left
}

// takes reports whether a user's erasure takes src: a source whose records named the
// user by the erasure's reference, under the same generation of the org's user
// reference key. A source named under another generation (before a rotation replaced
// the key) cannot be compared by reference: it goes when the erasure left it no head.
func (o op) takes(uri string, src *source) bool {
	if src.refGen == o.refGen {
		return src.userRef == o.userRef
	}
	return src.userRef != "" && !o.live[uri]
}

// apply applies ops in order and wakes the waiters of positions that moved.
func (x *Index) apply(ops []op) {
	if len(ops) == 0 {
		return
	}
	x.mu.Lock()
	touched := map[[2]string]*space{}
	for _, o := range ops {
		s := x.space(o.org, o.ns)
		touched[[2]string{o.org, o.ns}] = s
		s.pos = max(s.pos, o.seq)
		switch {
		case o.fence:
			for uri, src := range s.sources {
				if o.userRef != "" && !o.takes(uri, src) {
					continue // a user's erasure leaves the namespace's and the other users' documents
				}
				if len(src.chunks) == 0 || src.chunks[0].Seq < o.seq {
					s.drop(src)
					delete(s.sources, uri)
				}
			}
		case o.env != nil && o.content != nil:
			applyDocument(s, x.stems, o.env, o.content, o.refGen)
		}
	}
	for k, s := range touched {
		x.maybeBuild(k, s)
	}
	close(x.moved)
	x.moved = make(chan struct{})
	x.mu.Unlock()
}

func applyDocument(s *space, stems *text.Stems, env *events.Envelope, c *events.DocumentContent, refGen int) {
	d := env.Document
	src := s.sources[c.SourceURI]
	if src == nil {
		src = &source{}
		s.sources[c.SourceURI] = src
	}
	src.userRef, src.refGen = d.UserRef, refGen
	switch env.Type {
	case events.TypeDocumentDeleted:
		s.setDeleted(src, true)
		return
	case events.TypeDocumentRestored:
		s.setDeleted(src, false)
		return
	}
	if len(src.chunks) > 0 && src.chunks[0].Version >= d.Version {
		return // a replay of an older version
	}
	s.drop(src)
	src.deleted = false
	for _, ch := range c.Chunks {
		terms, tfs, n := stems.TermFreqs(ch.Text)
		k := &Chunk{SourceURI: c.SourceURI, DocID: d.DocID, Version: d.Version, Seq: env.Seq, Ordinal: ch.Ordinal,
			HeadingPath: ch.HeadingPath, Kind: ch.Kind, Text: ch.Text, Title: c.Title, Format: d.Format, Tags: c.Tags,
			UserID: c.UserID, UpdatedAt: d.UpdatedAt, vec: ch.Embedding, tfs: make(map[string]uint16, len(terms)), length: int(n), src: src, slot: int32(len(s.slots))}
		s.slots, s.lens, s.deleted = append(s.slots, k), append(s.lens, n), append(s.deleted, false)
		for i, t := range terms {
			k.tfs[t] = tfs[i]
			s.df[t]++
			p := s.post[t]
			if p == nil {
				p = &posting{}
				s.post[t] = p
			}
			p.entries = append(p.entries, entry{k.slot, tfs[i]})
		}
		s.chunks++
		s.totalLen += k.length
		s.addVector(k)
		src.chunks = append(src.chunks, k)
	}
}

// setDeleted marks src deleted or not, and its chunks' slots with it.
func (s *space) setDeleted(src *source, deleted bool) {
	src.deleted = deleted
	for _, c := range src.chunks {
		s.deleted[c.slot] = deleted
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

// Chunks is how many chunks the index holds of a namespace: none, and a search of it
// after the barrier finds nothing whatever its query (no embedding needed).
func (x *Index) Chunks(org, ns string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if s := x.spaces[[2]string{org, ns}]; s != nil {
		return s.chunks
	}
	return 0
}

// WaitFor waits until the index has applied a namespace's records up to gen, or ctx
// ends (its error then).
// A wait that finds the index behind wakes the follower, which otherwise rests between
// its fetches while nobody waits (follow_rest.go).
func (x *Index) WaitFor(ctx context.Context, org, ns string, gen int64) error {
	counted := false
	defer func() {
		if counted {
			x.waiting.Add(-1)
		}
	}()
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
		if !counted {
			counted = true
			x.waiting.Add(1)
		}
		x.want()
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
	// UpdatedAfter and UpdatedBefore bound when a chunk's version was written, each
	// excluded; zero: unbounded.
	UpdatedAfter, UpdatedBefore time.Time
	// Users is whose documents: every user's (the zero value), or the namespace's and
	// one user's (knowledge/query's readUsers).
	Users store.Users
}

// all reports whether f lets every chunk through.
func (f Filter) all() bool {
	return f.SourcePrefix == "" && len(f.Formats) == 0 && len(f.Tags) == 0 && f.UpdatedAfter.IsZero() && f.UpdatedBefore.IsZero() &&
		!f.Users.Scoped
}

func (f Filter) match(c *Chunk) bool {
	if !strings.HasPrefix(c.SourceURI, f.SourcePrefix) || !f.Users.Sees(c.UserID) {
		return false
	}
	if len(f.Formats) > 0 && !slices.Contains(f.Formats, c.Format) {
		return false
	}
	if !f.UpdatedAfter.IsZero() && !c.UpdatedAt.After(f.UpdatedAfter) || !f.UpdatedBefore.IsZero() && !c.UpdatedAt.Before(f.UpdatedBefore) {
		return false
	}
	for _, t := range f.Tags {
		if !slices.Contains(c.Tags, t) {
			return false
		}
	}
	return true
}
