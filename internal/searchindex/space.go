package searchindex

import (
	"cmp"
	"encoding/hex"
	"hash/maphash"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/text"
)

// doc flags.
const (
	flagLive    = 1 << iota // the slot holds an identity
	flagTomb                // deleted
	flagPinned              //
	flagContent             // searchable content held: terms, tags, key terms, maybe vectors
)

// never is the expiry of a row that does not expire.
const never = math.MaxInt64

// doc is one identity's served document. Names are interned per namespace; times are
// Unix seconds.
type doc struct {
	key         string
	next        int32 // the next slot holding the same memory_key, -1 for none
	sensitivity uint32
	memoryID    [16]byte
	sha         [32]byte
	version     int64
	seq         int64
	updated     int64
	nTags       uint16 // words[:nTags] are tags, words[nTags:] key terms
	nTerms      uint16 // distinct value terms (postings held)
	chunkRow    int32  // the first chunk row, chunks contiguous
	words       []uint32
}

func (d *doc) tags() []uint32     { return d.words[:d.nTags] }
func (d *doc) keyTerms() []uint32 { return d.words[d.nTags:] }

func postingOrder(a, b posting) int { return cmp.Compare(a.slot, b.slot) }

// keyLen is what a key posting carries: how many terms the document's key has.
func keyLen(d *doc) uint16 { return uint16(min(len(d.keyTerms()), math.MaxUint16)) }

// card is a copy of what every scan reads of a document (its filter columns, vector
// row, generation): kept apart from the rest so that a scan of a large namespace reads
// 48 bytes a document rather than the whole document. sync refreshes it after every
// change of the document.
type card struct {
	agent, user, session, memType uint32
	expires, validTo              int64
	docLen                        uint32
	vecRow                        int32
	gen, dim                      uint16
	status, flags, nChunks        uint8
}

func (c *card) has(f uint8) bool { return c.flags&f != 0 }

// setGen records a document's generation and whether it holds content, where postings
// are checked.
func (s *space) setGen(slot int32) {
	c := &s.cards[slot]
	live := uint32(c.gen)
	if c.has(flagContent) {
		live |= 1 << 16
	}
	s.gens[slot] = slotGen{live: live, docLen: c.docLen}
}

// slotGen is what the lexical leg reads of a document for each of its postings: its
// generation and content bit (current), and its length. Beside each other, a posting
// costs one cache miss, where reading the length from the document's card was a
// second (48-byte cards, 4.8 MB at 100,000 documents).
type slotGen struct {
	live   uint32 // the generation, and bit 16 when the document holds content
	docLen uint32
}

// posting is one document's entry in a term's list. A list lies in slot order (a
// slot's stale postings before its current one), so that a leg walks its lists
// together, document by document, rather than scoring into an array the size of the
// namespace. tf is a value term's count in the text; in a key term's list it is how
// many terms the key has.
type posting struct {
	slot uint32
	gen  uint16
	tf   uint16
}

// interner numbers strings from 1; 0 is "none". Its table is open addressing over the
// ids (linear probing, at most three quarters full): 4 to 8 bytes a name where a Go map
// costs some 40, and a namespace's lexicon holds a term for every unique word of its
// keys and values. The names lie end to end in one byte array rather than as a string
// each (a 16-byte header and an allocation of their own): a small namespace's
// vocabulary is nearly a term per word it holds, so that was most of what a memory in
// it cost beyond its vector.
type interner struct {
	text  []byte   // the names, end to end; bytes once written never change
	ends  []uint32 // ends[id]: where name id ends in text; ends[0] = 0 is "none"
	table []uint32 // 0: empty; else an id, placed by its name's hash
	seed  maphash.Seed
}

func newInterner() interner { return interner{ends: []uint32{0}, seed: maphash.MakeSeed()} }

// count is the number of ids given, "none" included: ids run from 1 to count-1.
func (n *interner) count() int { return len(n.ends) }

// name is the string numbered id. It shares the interner's bytes, which are never
// written again (a growth copies them to a new array and leaves the old one as it
// was), so it stays valid for as long as it is held.
func (n *interner) name(id uint32) string {
	if id == 0 {
		return ""
	}
	start, end := n.ends[id-1], n.ends[id]
	if start == end {
		return ""
	}
	return unsafe.String(&n.text[start], int(end-start))
}

func (n *interner) id(s string) uint32 {
	if id, ok := n.lookup(s); ok {
		return id
	}
	if 4*len(n.ends) >= 3*len(n.table) {
		n.grow()
	}
	id := uint32(len(n.ends))
	n.text = append(n.text, s...)
	n.ends = append(n.ends, uint32(len(n.text)))
	n.place(id)
	return id
}

func (n *interner) lookup(s string) (uint32, bool) {
	if len(n.table) == 0 {
		return 0, false
	}
	mask := uint64(len(n.table) - 1)
	for i := maphash.String(n.seed, s) & mask; ; i = (i + 1) & mask {
		id := n.table[i]
		if id == 0 {
			return 0, false
		}
		if n.name(id) == s {
			return id, true
		}
	}
}

// place puts an id in the first free cell from its name's hash.
func (n *interner) place(id uint32) {
	mask := uint64(len(n.table) - 1)
	i := maphash.String(n.seed, n.name(id)) & mask
	for n.table[i] != 0 {
		i = (i + 1) & mask
	}
	n.table[i] = id
}

func (n *interner) grow() {
	n.table = make([]uint32, max(16, 2*len(n.table)))
	for id := 1; id < len(n.ends); id++ {
		n.place(uint32(id))
	}
}

// size is what the interner's arrays hold.
func (n *interner) size() int64 {
	return int64(cap(n.text)) + 4*int64(cap(n.ends)) + 4*int64(cap(n.table))
}

// statuses are numbered across the index, so a filter's set is a bit mask.
var statusIDs = func() map[string]uint8 {
	m := map[string]uint8{}
	for i, s := range []memrow.Status{memrow.StatusActive, memrow.StatusConflicted, memrow.StatusSuperseded,
		memrow.StatusDuplicate, memrow.StatusProposed, memrow.StatusRejected} {
		m[string(s)] = uint8(i + 1)
	}
	return m
}()

// statusOther numbers a status this build does not know; no filter names it.
const statusOther = 63

func statusID(s string) uint8 {
	if id, ok := statusIDs[s]; ok {
		return id
	}
	return statusOther
}

// space is one namespace's index: its documents, lexicon and postings, vectors, and its
// position on the stream. mu guards everything but the position's waiters.
type space struct {
	mu   sync.RWMutex
	id   Space
	held bool

	pos       int64
	last      int64 // the highest seq seen
	changed   chan struct{}
	fenceAll  int64
	fenceUser map[string]int64
	lastUsed  atomic.Int64 // Unix nanoseconds of the last query, or of creation

	docs    []doc
	cards   []card    // parallel to docs
	gens    []slotGen // parallel to docs: gen, and 1<<16 when content is held (what a posting is checked against), and the length
	free    []uint32
	entries int
	byKey   keyTable // memory key → the first slot holding it
	names   interner
	lexicon interner
	post    []postList // term → value postings
	// keyPost holds the key postings of the terms that have any: a namespace's keys
	// name few of its terms, and a list header for every term was 24 bytes each.
	keyPost map[uint32][]posting
	live    int64 // postings of current gens
	stale   int64
	capPost int64 // sum of the posting lists' capacities
	words   int64 // sum of the docs' words capacities
	keyB    int64 // bytes of the docs' keys
	arenas  map[int]*arena

	filters filterCache // the eligible sets of recent filters (filter.go)

	building bool
	built    int // graph builds installed, for tests and stats
	extended int // of them, extensions of the graph before
}

func newSpace(id Space, now int64) *space {
	s := &space{id: id, held: true, changed: make(chan struct{}), fenceUser: map[string]int64{},
		byKey: newKeyTable(), names: newInterner(), lexicon: newInterner(), arenas: map[int]*arena{}}
	s.lastUsed.Store(now)
	return s
}

// find returns the slot of an identity.
func (s *space) find(agent, user, session, key string) (int32, bool) {
	a, ok1 := s.names.lookup(agent)
	u, ok2 := s.names.lookup(user)
	se, ok3 := s.names.lookup(session)
	if !ok1 || !ok2 || !ok3 {
		return -1, false
	}
	for slot, ok := s.byKey.head(s.docs, key); ok && slot >= 0; slot = s.docs[slot].next {
		c := &s.cards[slot]
		if c.agent == a && c.user == u && c.session == se {
			return slot, true
		}
	}
	return -1, false
}

func (s *space) alloc(key string) int32 {
	var slot int32
	if n := len(s.free); n > 0 {
		slot = int32(s.free[n-1])
		s.free = s.free[:n-1]
	} else {
		s.docs = append(s.docs, doc{})
		s.cards = append(s.cards, card{})
		s.gens = append(s.gens, slotGen{})
		slot = int32(len(s.docs) - 1)
	}
	d := &s.docs[slot]
	c := &s.cards[slot]
	*d = doc{key: key, chunkRow: -1}
	*c = card{gen: c.gen, flags: flagLive, vecRow: -1, expires: never, validTo: never}
	s.setGen(slot)
	d.next = s.byKey.push(s.docs, slot)
	s.entries++
	s.keyB += int64(len(key))
	return slot
}

// remove forgets an identity: an erasure took it.
func (s *space) remove(slot int32) {
	s.dropContent(slot)
	d := &s.docs[slot]
	c := &s.cards[slot]
	key := d.key
	if head, _ := s.byKey.head(s.docs, key); head == slot {
		if d.next >= 0 {
			s.byKey.push(s.docs, d.next)
		} else {
			s.byKey.delete(s.docs, key)
		}
	} else {
		for p := head; p >= 0; p = s.docs[p].next {
			if s.docs[p].next == slot {
				s.docs[p].next = d.next
				break
			}
		}
	}
	s.keyB -= int64(len(key))
	*d = doc{chunkRow: -1}
	*c = card{gen: c.gen, vecRow: -1}
	s.setGen(slot)
	s.free = append(s.free, uint32(slot))
	s.entries--
}

// dropContent retires everything searchable a document holds.
func (s *space) dropContent(slot int32) {
	s.dropVector(slot)
	s.dropChunks(slot)
	s.dropTerms(slot)
}

func (s *space) dropVector(slot int32) {
	c := &s.cards[slot]
	if c.vecRow >= 0 {
		a := s.arenas[int(c.dim)]
		a.dead++
		a.values--
		if a.graph != nil && int(c.vecRow) < a.graph.Limit() {
			a.graphDead++
		}
		c.vecRow = -1
	}
}

func (s *space) dropChunks(slot int32) {
	d := &s.docs[slot]
	c := &s.cards[slot]
	if c.nChunks > 0 {
		s.arenas[int(c.dim)].dead += int(c.nChunks)
		d.chunkRow, c.nChunks = -1, 0
	}
}

// dropTerms makes the document's postings stale and forgets its tags and key terms.
func (s *space) dropTerms(slot int32) {
	d := &s.docs[slot]
	c := &s.cards[slot]
	if !c.has(flagContent) {
		return
	}
	n := int64(d.nTerms) + int64(len(d.keyTerms()))
	s.live -= n
	s.stale += n
	s.words -= int64(cap(d.words))
	d.words, d.nTags, d.nTerms, c.docLen = nil, 0, 0, 0
	c.flags &^= flagContent
	s.bumpGen(slot)
}

// bumpGen moves a document to a new generation. Before a generation wraps, every stale
// posting is dropped, so no stale posting can ever carry a current generation.
func (s *space) bumpGen(slot int32) {
	if s.cards[slot].gen == math.MaxUint16 {
		s.setGen(slot)
		s.compactPostings()
	}
	s.cards[slot].gen++
	s.setGen(slot)
}

func (s *space) current(p posting) bool {
	_, ok := s.liveGen(p)
	return ok
}

// liveGen is the generation entry of p's document and whether p is of its current
// content: the lexical leg reads the document's length from the same entry.
func (s *space) liveGen(p posting) (slotGen, bool) {
	g := s.gens[p.slot]
	return g, g.live == uint32(p.gen)|1<<16
}

// compactPostings drops every stale posting.
func (s *space) compactPostings() {
	s.capPost = 0
	for t, l := range s.post {
		s.post[t] = listOf(s.compacted(l.slice()))
	}
	for t, list := range s.keyPost {
		if s.keyPost[t] = s.compacted(list); s.keyPost[t] == nil {
			delete(s.keyPost, t)
		}
	}
	s.stale = 0
}

// compacted is list without its stale postings (nil when none is left), in its own
// array when the one it had is more than twice what it needs; its capacity is counted.
func (s *space) compacted(list []posting) []posting {
	kept := list[:0]
	for _, p := range list {
		if s.current(p) {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		kept = nil
	} else if cap(kept) > 2*len(kept)+4 {
		kept = append([]posting(nil), kept...)
	}
	s.capPost += int64(cap(kept))
	return kept
}

// addPosting adds p to the value list of term.
func (s *space) addPosting(term uint32, p posting) {
	for int(term) >= len(s.post) {
		s.post = append(s.post, postList{})
	}
	s.post[term] = listOf(s.withPosting(s.post[term].slice(), p))
}

// addKeyPosting adds p to the key list of term.
func (s *space) addKeyPosting(term uint32, p posting) {
	if s.keyPost == nil {
		s.keyPost = map[uint32][]posting{}
	}
	s.keyPost[term] = s.withPosting(s.keyPost[term], p)
}

// withPosting is l with p in its place.
func (s *space) withPosting(l []posting, p posting) []posting {
	s.live++
	if n := len(l); n > 0 && l[n-1].slot >= p.slot {
		// A revision of an older document, or a freed slot taken again, goes to its
		// place in slot order: over the slot's stale posting when it has one (a
		// revision keeps most of its terms), else in between.
		i := sort.Search(n, func(i int) bool { return l[i].slot > p.slot })
		if i > 0 && l[i-1].slot == p.slot && !s.current(l[i-1]) {
			l[i-1] = p
			s.stale = max(s.stale-1, 0)
			return l
		}
		l = s.grown(l)
		l = l[:n+1]
		copy(l[i+1:], l[i:n])
		l[i] = p
		return l
	}
	return append(s.grown(l), p)
}

// grown is l with room for one more posting. Long lists grow by an eighth, not the
// runtime's quarter: postings are the index's second largest part.
func (s *space) grown(l []posting) []posting {
	if len(l) < cap(l) {
		return l
	}
	before := cap(l)
	if before >= 256 {
		l = append(make([]posting, 0, before+before/8), l...)
	} else {
		l = slices.Grow(l, 1)
	}
	s.capPost += int64(cap(l) - before)
	return l
}

// setTerms indexes a searchable revision's text, key and tags.
func (s *space) setTerms(slot int32, r *Revision, stems *text.Stems) {
	terms, tfs, docLen := stems.TermFreqs(r.Text)
	keyTerms := stems.Terms(memrow.KeyWords(r.MemoryKey))
	d := &s.docs[slot]
	c := &s.cards[slot]
	words := make([]uint32, 0, len(r.Tags)+len(keyTerms))
	for _, t := range r.Tags {
		words = append(words, s.names.id(t))
	}
	for _, t := range keyTerms {
		words = append(words, s.lexicon.id(t))
	}
	d.words, d.nTags = words, uint16(len(r.Tags))
	d.nTerms, c.docLen = uint16(len(terms)), docLen
	c.flags |= flagContent
	s.setGen(slot)
	s.words += int64(cap(words))
	for i, t := range terms {
		s.addPosting(s.lexicon.id(t), posting{slot: uint32(slot), gen: c.gen, tf: tfs[i]})
	}
	for _, t := range d.keyTerms() {
		s.addKeyPosting(t, posting{slot: uint32(slot), gen: c.gen, tf: keyLen(d)})
	}
}

// tidy drops what a namespace holds but does not serve (dead arena rows, stale
// postings) and the spare capacity of its arrays: once, when a warm-up ends, when the
// arrays hold what a replay's growth left.
func (s *space) tidy() {
	for _, a := range s.arenas {
		if a.graph == nil && (a.dead > 0 || cap(a.scales) > a.rows()+a.rows()/32) {
			s.compact(a)
		}
	}
	s.capPost = 0
	for t, l := range s.post {
		s.post[t] = listOf(s.tidied(l.slice()))
	}
	for t, list := range s.keyPost {
		if s.keyPost[t] = s.tidied(list); s.keyPost[t] == nil {
			delete(s.keyPost, t)
		}
	}
	s.stale = 0
	if n := len(s.docs); cap(s.docs) > n+n/32 {
		s.docs, s.cards, s.gens = slices.Clone(s.docs), slices.Clone(s.cards), slices.Clone(s.gens)
	}
	// A term's list header is 16 bytes, and the lists of a small namespace are nearly
	// one a word it holds: their growth's spare third was a tenth of its memory.
	s.post = clipped(s.post)
	s.names.trim()
	s.lexicon.trim()
}

// tidied is list with its current postings alone, without more than a thirty-second
// of spare capacity (nil when none is current); its capacity is counted.
func (s *space) tidied(list []posting) []posting {
	live := 0
	for _, p := range list {
		if s.current(p) {
			live++
		}
	}
	if live == len(list) && cap(list) <= live+live/32+4 {
		s.capPost += int64(cap(list))
		return list
	}
	if live == 0 {
		return nil
	}
	kept := make([]posting, 0, live)
	for _, p := range list {
		if s.current(p) {
			kept = append(kept, p)
		}
	}
	s.capPost += int64(cap(kept))
	return kept
}

// clipped is l without more than a thirty-second of spare capacity.
func clipped[T any](l []T) []T {
	if n := len(l); cap(l) > n+n/32 {
		return slices.Clone(l)
	}
	return l
}

// trim drops the spare capacity of the interner's names. Strings name gave out keep
// the old bytes, which do not change.
func (n *interner) trim() {
	n.text, n.ends = clipped(n.text), clipped(n.ends)
}

// maybeCompactPostings keeps stale postings below the live ones.
func (s *space) maybeCompactPostings() {
	if s.stale > 1024 && s.stale > s.live {
		s.compactPostings()
	}
}

func (s *space) arena(dim int) *arena {
	a, ok := s.arenas[dim]
	if !ok {
		a = &arena{dim: dim}
		s.arenas[dim] = a
	}
	return a
}

func parseSHA(h string) [32]byte {
	var out [32]byte
	hex.Decode(out[:], []byte(h))
	return out
}

func parseUUID(s string) [16]byte {
	u, err := uuid.Parse(s)
	if err != nil {
		return [16]byte{}
	}
	return u
}
