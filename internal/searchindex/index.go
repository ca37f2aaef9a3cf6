package searchindex

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/loomplane/loom/internal/hnsw"
	"github.com/loomplane/loom/internal/text"
)

// Config tunes the index. Zero fields take the defaults.
type Config struct {
	// GraphMin is how many value vectors a namespace holds before it gets an
	// approximate (HNSW) graph; below it every search scans exactly.
	GraphMin int
	// GraphM is the graph's links per node (twice that at its base level).
	GraphM int
	// GraphEfConstruction and GraphEfSearch are the breadths of the build's and of a
	// search's walks; a search walks at least as wide as the hits it keeps.
	GraphEfConstruction, GraphEfSearch int
	// ExactMax: a filter that leaves at most this many documents is scanned exactly,
	// graph or not.
	ExactMax int
	// GraphFilterRatio: the graph serves a filter that leaves at least 1/GraphFilterRatio
	// of its nodes; a more selective one is scanned exactly.
	GraphFilterRatio int
}

func (c Config) withDefaults() Config {
	if c.GraphMin <= 0 {
		c.GraphMin = 20000
	}
	if c.GraphM <= 0 {
		c.GraphM = hnsw.DefaultM
	}
	if c.GraphEfConstruction <= 0 {
		c.GraphEfConstruction = hnsw.DefaultEfConstruction
	}
	if c.GraphEfSearch <= 0 {
		c.GraphEfSearch = hnsw.DefaultEfSearch
	}
	if c.ExactMax <= 0 {
		c.ExactMax = 10000
	}
	if c.GraphFilterRatio <= 0 {
		c.GraphFilterRatio = 10
	}
	return c
}

// Index holds every namespace's search state. It is safe for concurrent use: one
// writer (a follower) applies while any number of searches read.
type Index struct {
	cfg    Config
	mu     sync.RWMutex
	spaces map[Space]*space

	builds   sync.WaitGroup
	buildSem chan struct{} // one graph build at a time: they are CPU-bound
	// deferBuilds holds graph builds back while a follower warms: a replay that grows a
	// namespace past GraphMin would otherwise rebuild its graph at every tenth of growth.
	deferBuilds atomic.Bool
	closed      chan struct{}
	close       sync.Once
	// stems is every namespace's stemmer: a replay stems the same words over and over.
	stems *text.Stems
}

// stemMemo is how many words the index's stem memo holds before it starts again.
const stemMemo = 1 << 16

// New returns an empty index.
func New(cfg Config) *Index {
	return &Index{cfg: cfg.withDefaults(), spaces: map[Space]*space{}, buildSem: make(chan struct{}, 1), closed: make(chan struct{}),
		stems: text.NewStems(stemMemo)}
}

// Close stops graph builds under way and waits for them.
func (x *Index) Close() {
	x.close.Do(func() { close(x.closed) })
	x.builds.Wait()
}

// Warming holds graph builds back until Warm: a warming follower calls it, so that
// each namespace gets one build over what the warm-up left rather than one at every
// tenth of its growth. Searches scan exactly meanwhile.
func (x *Index) Warming() { x.deferBuilds.Store(true) }

// Warm ends Warming: each namespace drops the dead rows and stale postings the warm-up
// left and the spare capacity of its arrays, and the graph builds now due start.
func (x *Index) Warm() {
	if !x.deferBuilds.Swap(false) {
		return
	}
	for _, s := range x.spaceList() {
		s.mu.Lock()
		if s.held {
			s.tidy()
		}
		s.mu.Unlock()
		x.Apply(s.id, nil) // resets what searches keep of the namespace, and starts its build
	}
}

func (x *Index) spaceList() []*space {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]*space, 0, len(x.spaces))
	for _, s := range x.spaces {
		out = append(out, s)
	}
	return out
}

// Settle waits for the graph builds under way; for tests and benchmarks.
func (x *Index) Settle() { x.builds.Wait() }

func (x *Index) space(sp Space, create bool) *space {
	x.mu.RLock()
	s := x.spaces[sp]
	x.mu.RUnlock()
	if s != nil || !create {
		return s
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if s = x.spaces[sp]; s == nil {
		s = newSpace(sp, time.Now().UnixNano())
		x.spaces[sp] = s
	}
	return s
}

// Apply applies one namespace's records, in the order its stream holds them, and
// returns its position. Waiters of seqs it reached are woken.
func (x *Index) Apply(sp Space, recs []Record) Applied {
	s := x.space(sp, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.filters.invalidate()
	out := s.apply(recs, x.stems)
	if s.held {
		x.maybeBuild(s)
	}
	return out
}

// Position is the highest seq of the namespace below which the index has applied
// everything.
func (x *Index) Position(sp Space) int64 {
	s := x.space(sp, false)
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pos
}

// WaitFor returns once the namespace's position reaches seq, or ctx's error when it ends
// first.
func (x *Index) WaitFor(ctx context.Context, sp Space, seq int64) error {
	if seq <= 0 {
		return nil
	}
	s := x.space(sp, true)
	for {
		s.mu.RLock()
		pos, changed := s.pos, s.changed
		s.mu.RUnlock()
		if pos >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Held reports whether the index serves the namespace's content (true for one it has
// not seen: it holds nothing of it, which is all there is).
func (x *Index) Held(sp Space) bool {
	s := x.space(sp, false)
	if s == nil {
		return true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.held
}

// HoldsKey reports whether the index holds a document of the key, under any identity,
// in the namespace (as far as its position): a write of a key it holds none of is
// likely a new key's.
func (x *Index) HoldsKey(sp Space, key string) bool {
	s := x.space(sp, false)
	if s == nil {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.byKey.head(s.docs, key)
	return ok
}

// Search runs the vector, chunk, lexical and key legs of q over the namespace and
// returns their hits with the position they read at.
func (x *Index) Search(sp Space, q Query) (Legs, int64, error) {
	s := x.space(sp, false)
	if s == nil {
		return Legs{}, 0, nil
	}
	s.lastUsed.Store(time.Now().UnixNano())
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.held {
		return Legs{}, s.pos, ErrNotHeld
	}
	return s.search(q, x.cfg), s.pos, nil
}

// Peers is memory.set's peer read: up to q.Limit served rows of q.MemoryType under other
// keys, nearest q.Vector, with the position it read at (the admission's capture: every
// revision at or below it was in what the read saw).
func (x *Index) Peers(sp Space, q PeerQuery) ([]Peer, int64, error) {
	s := x.space(sp, false)
	if s == nil {
		return nil, 0, nil
	}
	s.lastUsed.Store(time.Now().UnixNano())
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.held {
		return nil, s.pos, ErrNotHeld
	}
	return s.peers(q, x.cfg), s.pos, nil
}

// Evict drops a namespace's content to free its memory: from then on its searches and
// peer reads answer ErrNotHeld (read ClickHouse), while its position keeps following
// the stream. It is held again only by a process that replays the stream anew.
func (x *Index) Evict(sp Space) {
	s := x.space(sp, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.held {
		return
	}
	s.filters.invalidate()
	s.held = false
	s.docs, s.cards, s.gens, s.free, s.byKey, s.post, s.keyPost, s.arenas = nil, nil, nil, nil, newKeyTable(), nil, nil, map[int]*arena{}
	s.names, s.lexicon = newInterner(), newInterner()
	s.entries, s.live, s.stale, s.capPost, s.words, s.keyB = 0, 0, 0, 0, 0, 0
}

// Enforce evicts the coldest held namespaces (least recently searched, the larger
// first among equals) until the index holds at most maxBytes, and returns them.
func (x *Index) Enforce(maxBytes int64) []Space {
	st := x.Stats()
	if maxBytes <= 0 || st.Bytes <= maxBytes {
		return nil
	}
	held := slices.DeleteFunc(st.Spaces, func(s SpaceStats) bool { return !s.Held })
	slices.SortFunc(held, func(a, b SpaceStats) int {
		if c := a.LastUsed.Compare(b.LastUsed); c != 0 {
			return c
		}
		return int(b.Bytes - a.Bytes)
	})
	total := st.Bytes
	var out []Space
	for _, s := range held {
		if total <= maxBytes {
			break
		}
		x.Evict(s.Space)
		total -= s.Bytes
		out = append(out, s.Space)
	}
	return out
}

// Stats is what the index holds.
type Stats struct {
	Namespaces int   // namespaces followed
	Held       int   // of them, served from memory
	Entries    int64 // identities held
	Vectors    int64 // value vectors held
	Bytes      int64 // an estimate of the memory the index's structures hold
	Spaces     []SpaceStats
}

// SpaceStats is one namespace's part.
type SpaceStats struct {
	Space
	Held     bool
	Entries  int
	Vectors  int
	Bytes    int64
	Position int64
	Last     int64 // the highest seq seen
	Graph    int   // nodes of its graphs
	LastUsed time.Time
}

// Stats reports what every namespace holds.
func (x *Index) Stats() Stats {
	var st Stats
	for _, s := range x.spaceList() {
		s.mu.RLock()
		ss := SpaceStats{Space: s.id, Held: s.held, Entries: s.entries, Bytes: s.bytes(), Position: s.pos, Last: s.last,
			LastUsed: time.Unix(0, s.lastUsed.Load())}
		for _, a := range s.arenas {
			ss.Vectors += a.values
			if a.graph != nil {
				ss.Graph += a.graph.Nodes()
			}
		}
		s.mu.RUnlock()
		st.Namespaces++
		if ss.Held {
			st.Held++
		}
		st.Entries += int64(ss.Entries)
		st.Vectors += int64(ss.Vectors)
		st.Bytes += ss.Bytes
		st.Spaces = append(st.Spaces, ss)
	}
	slices.SortFunc(st.Spaces, func(a, b SpaceStats) int {
		return cmp.Or(strings.Compare(a.Org, b.Org), strings.Compare(a.Namespace, b.Namespace))
	})
	return st
}

// Estimated costs of a Go map entry (key, value, and the table's overhead) and of a
// string header.
const (
	mapEntryBytes = 48
	stringBytes   = 16
)

// bytes estimates what the namespace's structures hold, spare capacity included.
func (s *space) bytes() int64 {
	b := int64(unsafe.Sizeof(space{}))
	b += int64(cap(s.docs))*int64(unsafe.Sizeof(doc{})) + int64(cap(s.cards))*int64(unsafe.Sizeof(card{})) + int64(cap(s.gens))*int64(unsafe.Sizeof(slotGen{})) + 4*s.words + s.keyB + 4*int64(cap(s.free))
	b += s.byKey.bytes()
	b += s.names.size() + s.lexicon.size()
	b += s.capPost*int64(unsafe.Sizeof(posting{})) + int64(cap(s.post))*int64(unsafe.Sizeof(postList{})) + int64(len(s.keyPost))*mapEntryBytes
	b += int64(len(s.fenceUser)) * mapEntryBytes
	for _, a := range s.arenas {
		b += a.bytes()
	}
	return b
}
