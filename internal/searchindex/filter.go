package searchindex

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/loomplane/loom/internal/hnsw"
)

// noName is a name id no row holds.
const noName = ^uint32(0)

// matcher is a Filter (or a peer read) resolved against one namespace's names. ok is
// false when it names something the namespace never held: nothing matches.
type matcher struct {
	ok                            bool
	agent, user, session, memType uint32 // 0: any
	orUser                        uint32 // a second user whose rows pass too (0: none)
	tags                          []uint32
	tagsAny                       bool
	statuses                      uint64
	now, validAt                  int64
	notSlots                      []int32 // peers: the rows under the write's key, none of them a peer
	peerUser                      uint32  // peers: that user's rows and pinned rows
	peerScope                     bool
}

func (s *space) named(v string, out *uint32) bool {
	if v == "" {
		return true
	}
	id, ok := s.names.lookup(v)
	*out = id
	return ok
}

func (s *space) compile(f Filter) matcher {
	m := matcher{ok: true, tagsAny: f.TagsAny, now: f.Now.Unix(), validAt: f.Now.Unix()}
	if !f.ValidAt.IsZero() {
		m.validAt = f.ValidAt.Unix()
	}
	for _, n := range []struct {
		v   string
		out *uint32
	}{{f.Agent, &m.agent}, {f.MemoryType, &m.memType}} {
		if !s.named(n.v, n.out) {
			m.ok = false
		}
	}
	// OrUserID's rows pass the filter's user and session, when it names either.
	or := f.OrUserID != "" && (f.UserID != "" || f.SessionID != "")
	if or && !s.named(f.OrUserID, &m.orUser) {
		m.orUser, or = 0, false // no such rows here
	}
	for _, n := range []struct {
		v   string
		out *uint32
	}{{f.UserID, &m.user}, {f.SessionID, &m.session}} {
		if !s.named(n.v, n.out) {
			*n.out = noName // the filter's user (session) has no rows here; OrUserID's may
			m.ok = m.ok && or
		}
	}
	for _, st := range f.Statuses {
		if id, ok := statusIDs[st]; ok {
			m.statuses |= 1 << id
		}
	}
	for _, t := range f.Tags {
		id, ok := s.names.lookup(t)
		switch {
		case ok:
			m.tags = append(m.tags, id)
		case !f.TagsAny:
			m.ok = false // a tag no row holds: no row holds them all
		}
	}
	if f.TagsAny && len(f.Tags) > 0 && len(m.tags) == 0 {
		m.ok = false
	}
	return m
}

// compilePeers is the peer rule: a served row of the write's type under another key, in
// the writer's read scope unless pinned.
func (s *space) compilePeers(q PeerQuery) matcher {
	m := s.compile(Filter{MemoryType: q.MemoryType, Statuses: []string{"active", "conflicted"}, Now: q.Now})
	for slot, ok := s.byKey.head(s.docs, q.MemoryKey); ok && slot >= 0; slot = s.docs[slot].next {
		m.notSlots = append(m.notSlots, slot)
	}
	if q.ReadUserID != "" {
		m.peerScope = true
		m.peerUser, _ = s.names.lookup(q.ReadUserID) // an unknown user still reaches pinned rows
	}
	return m
}

// match reports whether a document is served under the matcher. Only documents holding
// searchable content are: not deleted, not high, of a searchable type. It reads the
// document's card, and the document itself only for tags.
func (m *matcher) match(s *space, slot int) bool {
	d := &s.cards[slot]
	if !d.has(flagContent) || m.statuses&(1<<d.status) == 0 || d.expires <= m.now || d.validTo <= m.validAt {
		return false
	}
	or := m.orUser != 0 && d.user == m.orUser
	if (m.agent != 0 && d.agent != m.agent) || (!or && ((m.user != 0 && d.user != m.user) || (m.session != 0 && d.session != m.session))) ||
		(m.memType != 0 && d.memType != m.memType) {
		return false
	}
	if len(m.tags) > 0 {
		tags := s.docs[slot].tags()
		if m.tagsAny {
			if !slices.ContainsFunc(m.tags, func(t uint32) bool { return slices.Contains(tags, t) }) {
				return false
			}
		} else {
			for _, t := range m.tags {
				if !slices.Contains(tags, t) {
					return false
				}
			}
		}
	}
	if len(m.notSlots) > 0 && slices.Contains(m.notSlots, int32(slot)) {
		return false
	}
	if m.peerScope && !d.has(flagPinned) && (m.peerUser == 0 || d.user != m.peerUser) {
		return false
	}
	return true
}

// eligible is the set of slots a query's matcher takes, with the lexical statistics of
// the set (BM25's are computed over the filtered documents) and the slots of it that
// hold chunk windows. It is shared by the searches that reuse it (filterCache): read
// only.
type eligible struct {
	bits    []uint64
	count   int
	n       int // documents with a length
	sumDL   float64
	chunked []uint32 // eligible slots with chunk windows, in slot order
	// until is the first second at which a document's expiry (or validity, when it is
	// judged now) drops it from the set: the set holds for queries from now to until.
	from, until int64

	// graphNodes is the set as the nodes of an arena's graph: the nodes whose row is
	// still their document's value and whose document the set takes, so a graph walk
	// tests one bit a node. Built by the first walk of each graph.
	nodesMu    sync.Mutex
	graphNodes []graphNodes
}

type graphNodes struct {
	g     *hnsw.Graph
	epoch int
	bits  []uint64
}

// nodesOf returns the set's bits over g's nodes; a is the arena g was built over.
func (e *eligible) nodesOf(s *space, a *arena, g *hnsw.Graph) []uint64 {
	e.nodesMu.Lock()
	defer e.nodesMu.Unlock()
	for _, gn := range e.graphNodes {
		if gn.g == g && gn.epoch == a.epoch {
			return gn.bits
		}
	}
	out := make([]uint64, (g.Nodes()+63)/64)
	for n, row := range g.Rows() {
		if slot := a.owner[row]; s.cards[slot].vecRow == row && e.has(slot) {
			out[n>>6] |= 1 << (uint(n) & 63)
		}
	}
	e.graphNodes = append(e.graphNodes[:0], graphNodes{g: g, epoch: a.epoch, bits: out})
	return out
}

func (e *eligible) has(slot uint32) bool { return e.bits[slot>>6]&(1<<(slot&63)) != 0 }

func (s *space) eligible(m *matcher) *eligible {
	e := &eligible{bits: make([]uint64, (len(s.docs)+63)/64), from: m.now, until: never}
	if !m.ok {
		return e
	}
	byNow := m.validAt == m.now
	for slot := range s.cards {
		if m.match(s, slot) {
			e.bits[slot>>6] |= 1 << (uint(slot) & 63)
			e.count++
			d := &s.cards[slot]
			if d.docLen > 0 {
				e.n++
				e.sumDL += float64(d.docLen)
			}
			if d.nChunks > 0 {
				e.chunked = append(e.chunked, uint32(slot))
			}
			e.until = min(e.until, d.expires)
			if byNow {
				e.until = min(e.until, d.validTo)
			}
		}
	}
	return e
}

// filterCache keeps the eligible sets of a namespace's recent filters: a search at 100k
// documents spends a millisecond matching every card, and most searches of a namespace
// repeat a few filters. Any change to the namespace (an Apply) drops them all; a set
// serves a query whose clock is within its [from, until) and whose filter is the same
// apart from the clock.
type filterCache struct {
	mu      sync.Mutex
	epoch   uint64 // bumped by every change to the namespace, under its write lock
	entries []filterEntry
}

type filterEntry struct {
	key   string
	epoch uint64
	set   *eligible
}

// filterCacheSize is how many filters' sets a namespace keeps.
const filterCacheSize = 4

// invalidate drops the cached sets; the caller holds the namespace's write lock.
func (c *filterCache) invalidate() {
	c.mu.Lock()
	c.epoch++
	c.entries = c.entries[:0]
	c.mu.Unlock()
}

// cacheKey is the matcher without its clock (and with the validity instant only when
// it is not the clock: an as_of).
func (m *matcher) cacheKey() string {
	var b strings.Builder
	validAt := int64(0)
	if m.validAt != m.now {
		validAt = m.validAt
	}
	fmt.Fprintf(&b, "%t|%d|%d|%d|%d|%d|%t|%d|%d|%v|%d|%t|", m.ok, m.agent, m.user, m.orUser, m.session, m.memType, m.tagsAny, m.statuses,
		validAt, m.notSlots, m.peerUser, m.peerScope)
	for _, t := range m.tags {
		fmt.Fprintf(&b, "%d,", t)
	}
	return b.String()
}

// eligibleCached is eligible, served from the namespace's filter cache when it holds
// the set; the caller holds the namespace's read lock.
func (s *space) eligibleCached(m *matcher) *eligible {
	key := m.cacheKey()
	c := &s.filters
	c.mu.Lock()
	for _, en := range c.entries {
		if en.key == key && en.epoch == c.epoch && m.now >= en.set.from && m.now < en.set.until {
			c.mu.Unlock()
			return en.set
		}
	}
	epoch := c.epoch
	c.mu.Unlock()
	e := s.eligible(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return e
	}
	c.entries = slices.DeleteFunc(c.entries, func(en filterEntry) bool { return en.key == key })
	if len(c.entries) >= filterCacheSize {
		c.entries = slices.Delete(c.entries, 0, 1)
	}
	c.entries = append(c.entries, filterEntry{key: key, epoch: epoch, set: e})
	return e
}
