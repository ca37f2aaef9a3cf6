package searchindex

import (
	"cmp"
	"encoding/hex"
	"math"
	"runtime"
	"slices"
	"strings"

	"github.com/loomplane/loom/internal/hnsw"
)

// overfetch is how many candidates a coded scan keeps for limit hits: the rescore may
// reorder the edge of the list.
func overfetch(limit int) int { return limit + limit/4 + 16 }

// query is a float32 vector and its codes.
type query struct {
	vec   []float32
	codes []int8
	scale float32
}

func newQuery(v []float32) query {
	q := query{vec: v, codes: make([]int8, len(v))}
	q.scale = hnsw.Quantise(v, q.codes)
	return q
}

// nearest ranks the value vectors of the documents accept takes by similarity to q and
// returns up to limit slots with their rescored similarity, best first. It scans exactly
// unless the arena has a graph and accept leaves enough of it (eligibleCount) for the
// graph to find them; the graph's candidates and the tail are rescored together.
//
// e, when set, is the filter's eligible set, and accept its has: the graph's walk
// then tests e's bits over the graph's nodes.
func (s *space) nearest(q query, limit, eligibleCount int, accept func(slot uint32) bool, e *eligible, cfg Config) []scored {
	a := s.arenas[len(q.vec)]
	if a == nil || limit <= 0 {
		return nil
	}
	k := overfetch(limit)
	top := hnsw.NewTopK(k)
	coded := func(row int32) float32 { return q.scale * a.scales[row] * float32(hnsw.Dot(q.codes, a.row(row))) }
	live := func(row int32) (uint32, bool) {
		slot := a.owner[row]
		return slot, s.cards[slot].vecRow == row && accept(slot)
	}
	g := a.graph
	if g != nil && eligibleCount > cfg.ExactMax && eligibleCount*cfg.GraphFilterRatio >= g.Nodes() {
		// The graph walks every node; those accept refuses are passed through, so the
		// walk widens by the share it refuses.
		ef := max(cfg.GraphEfSearch, k)
		if share := float64(eligibleCount) / float64(max(a.values, 1)); share < 1 {
			ef = min(int(float64(ef)/share), 8*max(cfg.GraphEfSearch, k))
		}
		rows := g.Rows()
		acceptNode := func(n uint32) bool { _, ok := live(rows[n]); return ok }
		if e != nil {
			nodes := e.nodesOf(s, a, g)
			acceptNode = func(n uint32) bool { return nodes[n>>6]&(1<<(n&63)) != 0 }
		}
		found := g.Search(func(n uint32) float32 { return coded(rows[n]) }, hnsw.RowWarmer(a.codes, a.scales, a.dim, rows), ef, acceptNode, 40*ef)
		for _, c := range found {
			top.Offer(a.owner[rows[c.Node]], c.Sim)
		}
		for row := int32(g.Limit()); row < int32(a.rows()); row++ {
			if slot, ok := live(row); ok {
				top.Offer(slot, coded(row))
			}
		}
	} else {
		dim := len(q.vec)
		for slot := range s.cards {
			c := &s.cards[slot]
			if c.vecRow >= 0 && int(c.dim) == dim && accept(uint32(slot)) {
				r := int(c.vecRow)
				top.Offer(uint32(slot), q.scale*a.scales[r]*float32(hnsw.Dot(q.codes, a.codes[r*dim:(r+1)*dim])))
			}
		}
	}
	// The kept slots' rows are read together before any is scored: scored one after the
	// other, each slot's card, scale and row were misses that waited for each other.
	slots := top.IDs()
	rows := make([]int32, len(slots))
	for i, slot := range slots {
		rows[i] = s.cards[slot].vecRow
	}
	runtime.KeepAlive(a.warm(rows))
	out := make([]scored, len(slots))
	for i, slot := range slots {
		r := rows[i]
		out[i] = scored{slot: slot, score: float64(a.scales[r] * hnsw.DotFloat(q.vec, a.row(r)))}
	}
	s.rank(out)
	return out[:min(limit, len(out))]
}

// scored is a slot and its score; a lexical hit's terms are the query terms that
// scored it (bit i: the i-th term with postings), for its coverage.
type scored struct {
	slot  uint32
	terms uint32
	score float64
}

// rescore scores slots again, ranks them (ties by identity) and keeps limit.
func (s *space) rescore(slots []uint32, limit int, score func(uint32) float32) []scored {
	out := make([]scored, len(slots))
	for i, slot := range slots {
		out[i] = scored{slot: slot, score: float64(score(slot))}
	}
	s.rank(out)
	return out[:min(limit, len(out))]
}

// rank sorts by score, best first, ties by identity (agent, user, session, key). It
// sorts by score alone and looks identities up only within a run of tied scores: a
// vector leg's scores hardly ever tie, a lexical leg's tie by the hundred (one term,
// the same length).
func (s *space) rank(out []scored) {
	if len(out) < 2 {
		return
	}
	slices.SortFunc(out, func(a, b scored) int { return cmp.Compare(b.score, a.score) })
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].score == out[i].score {
			j++
		}
		if j-i > 1 {
			s.rankTies(out[i:j])
		}
		i = j
	}
}

// rankTies orders tied hits by identity. Names are interned, so two hits of one agent
// (user, session) hold the same number, and the names are looked up and compared only
// where the numbers differ: the tied hits of one leg are mostly of one agent, user and
// session, and differ by key alone. Keys are compared by their first eight bytes as a
// number first (keyPrefix), and as strings only where those are the same: a lexical
// leg's ties sort by the hundred, and comparing strings was most of their sort.
func (s *space) rankTies(tied []scored) {
	items := make([]rankItem, len(tied))
	for i, sc := range tied {
		c := &s.cards[sc.slot]
		key := s.docs[sc.slot].key
		items[i] = rankItem{scored: sc, names: [3]uint32{c.agent, c.user, c.session}, prefix: keyPrefix(key), key: key}
	}
	n := &s.names
	slices.SortFunc(items, func(a, b rankItem) int {
		for i := range a.names {
			if a.names[i] == b.names[i] {
				continue
			}
			if c := strings.Compare(n.name(a.names[i]), n.name(b.names[i])); c != 0 {
				return c
			}
		}
		if a.prefix != b.prefix {
			return cmp.Compare(a.prefix, b.prefix)
		}
		return strings.Compare(a.key, b.key)
	})
	for i := range items {
		tied[i] = items[i].scored
	}
}

type rankItem struct {
	scored
	names  [3]uint32 // agent, user, session
	prefix uint64    // keyPrefix(key)
	key    string
}

// keyPrefix is key's first eight bytes, big-endian, zero-padded: where two keys'
// prefixes differ, they order as the keys do (a shorter key padded with zeros sorts
// before a longer one it begins, as strings.Compare has it), so only keys whose
// prefixes are the same need comparing as strings.
func keyPrefix(key string) uint64 {
	var p uint64
	for i := 0; i < 8; i++ {
		p <<= 8
		if i < len(key) {
			p |= uint64(key[i])
		}
	}
	return p
}

// chunks ranks the documents by their best window's similarity to q.
func (s *space) chunks(q query, limit int, e *eligible) []scored {
	a := s.arenas[len(q.vec)]
	if a == nil || limit <= 0 {
		return nil
	}
	top := hnsw.NewTopK(overfetch(limit))
	for _, slot := range e.chunked {
		c := &s.cards[slot]
		if int(c.dim) != len(q.vec) {
			continue
		}
		d := &s.docs[slot]
		best := float32(math.Inf(-1))
		for r := d.chunkRow; r < d.chunkRow+int32(c.nChunks); r++ {
			best = max(best, q.scale*a.scales[r]*float32(hnsw.Dot(q.codes, a.row(r))))
		}
		top.Offer(slot, best)
	}
	return s.rescore(top.IDs(), limit, func(slot uint32) float32 {
		d := &s.docs[slot]
		c := &s.cards[slot]
		best := float32(math.Inf(-1))
		for r := d.chunkRow; r < d.chunkRow+int32(c.nChunks); r++ {
			best = max(best, a.scales[r]*hnsw.DotFloat(q.vec, a.row(r)))
		}
		return best
	})
}

// lexical scores the eligible documents with Okapi BM25 over their terms, the document
// statistics taken over the eligible set, and each hit's coverage: the share of the
// query's total idf its terms hold.
//
// Its lists lie in slot order, so it scores a window of slots at a time, term by term
// into an array the size of the window: what a posting updates stays in the cache
// however large the namespace, and a document's score is summed in term order.
func (s *space) lexical(terms []string, limit int, k1, b float64, e *eligible) ([]scored, map[uint32]float64) {
	if len(terms) == 0 || e.n == 0 || limit <= 0 {
		return nil, nil
	}
	n := float64(e.n)
	avgdl := math.Max(e.sumDL/n, 1)
	var (
		curs  []cursor
		idfs  []float64
		total float64
	)
	for _, t := range terms {
		var list []posting
		if id, ok := s.lexicon.lookup(t); ok && int(id) < len(s.post) {
			list = s.post[id].slice()
		}
		df := 0.0
		for _, p := range list {
			if e.has(p.slot) && s.current(p) {
				df++
			}
		}
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		total += idf
		if df > 0 {
			curs, idfs = append(curs, cursor{list: list}), append(idfs, idf)
		}
	}
	const window = 4096
	var acc [window]float64 // a score is 0 until a posting adds to it
	// held[at] is the set of terms (bit i: curs[i]) that scored the window's slot at,
	// which a kept hit carries for its coverage; past maxHeld terms the coverage is
	// looked up in the lists instead.
	var held [window]uint32
	byHeld := len(curs) <= maxHeld
	touched := make([]uint16, 0, window)
	top := newBest(limit)
	for {
		base := least(curs)
		if base == endSlot {
			break
		}
		base &^= window - 1
		for i := range curs {
			c, idf := &curs[i], idfs[i]
			for ; c.at < len(c.list) && c.list[c.at].slot < base+window; c.at++ {
				p := c.list[c.at]
				if !e.has(p.slot) {
					continue
				}
				g, ok := s.liveGen(p)
				if !ok {
					continue
				}
				tf, dl := float64(p.tf), float64(g.docLen)
				at := p.slot - base
				if acc[at] == 0 {
					touched = append(touched, uint16(at))
				}
				acc[at] += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*dl/avgdl))
				if byHeld {
					held[at] |= 1 << i
				}
			}
		}
		for _, at := range touched {
			top.offer(scored{slot: base + uint32(at), score: acc[at], terms: held[at]})
			acc[at], held[at] = 0, 0
		}
		touched = touched[:0]
	}
	out := top.list(s)
	coverage := make(map[uint32]float64, len(out))
	for _, sc := range out {
		for i := range curs {
			var ok bool
			if byHeld {
				ok = sc.terms&(1<<i) != 0
			} else {
				_, ok = find(s, curs[i].list, sc.slot)
			}
			if ok {
				coverage[sc.slot] += idfs[i] / total
			}
		}
	}
	return out, coverage
}

// maxHeld is how many matched terms a lexical hit records in scored.terms.
const maxHeld = 32

// keys finds documents whose key the query names: the key verbatim (1), else the share
// of the key's terms the query holds, read from the query terms' key lists together.
func (s *space) keys(text string, terms []string, limit int, e *eligible) []scored {
	verbatim := strings.TrimSpace(text)
	if len(terms) == 0 {
		terms = []string{verbatim}
	}
	var want []cursor
	var seen []uint32
	for _, t := range terms {
		if id, ok := s.lexicon.lookup(t); ok && !slices.Contains(seen, id) {
			seen = append(seen, id)
			if list, ok := s.keyPost[id]; ok {
				want = append(want, cursor{list: list})
			}
		}
	}
	top := newBest(limit)
	var named []uint32 // the slots holding the key verbatim, in order
	if head, ok := s.byKey.head(s.docs, verbatim); ok {
		for slot := head; slot >= 0; slot = s.docs[slot].next {
			if e.has(uint32(slot)) {
				named = append(named, uint32(slot))
				top.offer(scored{slot: uint32(slot), score: 1})
			}
		}
		slices.Sort(named)
	}
	for {
		slot := least(want)
		if slot == endSlot {
			break
		}
		held, of := 0, 0
		for i := range want {
			p, n := want[i].take(s, slot)
			if n > 0 {
				held, of = held+n, int(p.tf)
			}
		}
		if held == 0 || !e.has(slot) {
			continue
		}
		if _, ok := slices.BinarySearch(named, slot); ok {
			continue
		}
		top.offer(scored{slot: slot, score: float64(held) / float64(max(of, 1))})
	}
	return top.list(s)
}

// best keeps the k highest-scoring slots seen (a min-heap on score).
type best struct {
	k     int
	items []scored
}

func newBest(k int) *best { return &best{k: k, items: make([]scored, 0, min(k, 1024))} }

func (b *best) offer(sc scored) {
	if b.k <= 0 {
		return
	}
	if len(b.items) < b.k {
		b.items = append(b.items, sc)
		for i := len(b.items) - 1; i > 0; {
			p := (i - 1) / 2
			if b.items[i].score >= b.items[p].score {
				break
			}
			b.items[i], b.items[p] = b.items[p], b.items[i]
			i = p
		}
		return
	}
	if sc.score <= b.items[0].score {
		return
	}
	b.items[0] = sc
	for i, n := 0, len(b.items); ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && b.items[l].score < b.items[m].score {
			m = l
		}
		if r < n && b.items[r].score < b.items[m].score {
			m = r
		}
		if m == i {
			break
		}
		b.items[i], b.items[m] = b.items[m], b.items[i]
		i = m
	}
}

// list returns what was kept, ranked.
func (b *best) list(s *space) []scored {
	s.rank(b.items)
	return b.items
}

func (s *space) identity(slot uint32) Identity {
	d := &s.docs[slot]
	c := &s.cards[slot]
	n := &s.names
	return Identity{Agent: n.name(c.agent), UserID: n.name(c.user), SessionID: n.name(c.session), MemoryKey: d.key}
}

func (s *space) hits(list []scored, coverage map[uint32]float64) []Hit {
	if len(list) == 0 {
		return nil
	}
	runtime.KeepAlive(s.warmHits(list))
	out := make([]Hit, len(list))
	for i, sc := range list {
		d := &s.docs[sc.slot]
		c := &s.cards[sc.slot]
		out[i] = Hit{Identity: s.identity(sc.slot), ContentSHA256: hex.EncodeToString(d.sha[:]),
			MemoryType: s.names.name(c.memType), Score: sc.score, Coverage: coverage[sc.slot]}
	}
	return out
}

// warmHits reads what hits builds of each hit (its card, its document's key, hash and
// the key's bytes) in tight loops whose loads do not wait for each other, and returns
// what it read (for runtime.KeepAlive). Built one after the other, each hit's card and
// document were misses that waited for the hit before: a leg's hits lie scattered over
// the namespace's arrays.
func (s *space) warmHits(list []scored) uint32 {
	var sum uint32
	for _, sc := range list {
		d := &s.docs[sc.slot]
		sum += s.cards[sc.slot].agent + uint32(len(d.key)) + uint32(d.sha[31])
	}
	for _, sc := range list {
		if k := s.docs[sc.slot].key; k != "" {
			sum += uint32(k[0])
		}
	}
	return sum
}

// search runs every leg of q over one pass of its filter.
func (s *space) search(q Query, cfg Config) Legs {
	m := s.compile(q.Filter)
	e := s.eligibleCached(&m)
	var legs Legs
	if e.count == 0 {
		return legs
	}
	if len(q.Vector) > 0 {
		qv := newQuery(q.Vector)
		legs.Vector = s.hits(s.nearest(qv, q.Limit, e.count, e.has, e, cfg), nil)
		legs.Chunk = s.hits(s.chunks(qv, q.Limit, e), nil)
	}
	lex, coverage := s.lexical(q.Terms, q.Limit, q.K1, q.B, e)
	legs.Lexical = s.hits(lex, coverage)
	legs.Key = s.hits(s.keys(q.Text, q.Terms, q.Limit, e), nil)
	return legs
}

// peers is the peer read.
func (s *space) peers(q PeerQuery, cfg Config) []Peer {
	m := s.compilePeers(q)
	if !m.ok || len(q.Vector) == 0 {
		return nil
	}
	// Only a graph's walk needs to know how many rows the read takes; an exact scan
	// tests each row once as it goes.
	count := 0
	if a := s.arenas[len(q.Vector)]; a != nil && a.graph != nil {
		for slot := range s.cards {
			if m.match(s, slot) {
				count++
			}
		}
		if count == 0 {
			return nil
		}
	}
	found := s.nearest(newQuery(q.Vector), q.Limit, count, func(slot uint32) bool { return m.match(s, int(slot)) }, nil, cfg)
	out := make([]Peer, len(found))
	ids := peerStrings(s, found)
	for i, f := range found {
		out[i] = Peer{Identity: s.identity(f.slot), MemoryID: ids[i*peerStringLen : i*peerStringLen+36],
			ContentSHA256: ids[i*peerStringLen+36 : (i+1)*peerStringLen], Cosine: f.score}
	}
	return out
}

// peerStringLen is a peer's memory id (36 characters) and content hash (64) written
// one after the other.
const peerStringLen = 36 + 64

// peerStrings writes every found peer's memory id and content hash into one string:
// a peer read runs once a write, and one allocation for all its peers' names (not two
// a peer) is less for the collector to do.
func peerStrings(s *space, found []scored) string {
	var b strings.Builder
	b.Grow(len(found) * peerStringLen)
	var id [36]byte
	var sha [64]byte
	for _, f := range found {
		d := &s.docs[f.slot]
		encodeUUID(&id, d.memoryID)
		hex.Encode(sha[:], d.sha[:])
		b.Write(id[:])
		b.Write(sha[:])
	}
	return b.String()
}

// encodeUUID writes u as uuid.UUID.String does (8-4-4-4-12 lower-case hex digits).
func encodeUUID(dst *[36]byte, u [16]byte) {
	hex.Encode(dst[0:8], u[0:4])
	dst[8] = '-'
	hex.Encode(dst[9:13], u[4:6])
	dst[13] = '-'
	hex.Encode(dst[14:18], u[6:8])
	dst[18] = '-'
	hex.Encode(dst[19:23], u[8:10])
	dst[23] = '-'
	hex.Encode(dst[24:], u[10:])
}
