package searchindex

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"
)

// checkpointVersion numbers the layout WriteCheckpoint writes; ReadCheckpoint refuses
// any other (ErrCheckpointVersion), and the caller replays the topic instead.
const checkpointVersion = 1

// ErrCheckpointVersion: the checkpoint was written in a layout this build does not read.
var ErrCheckpointVersion = errors.New("searchindex: checkpoint written in another format version")

// WriteCheckpoint writes what the index serves, namespace by namespace, each under its
// read lock: the caller holds the writer (Apply) still, so that the checkpoint stands
// for one point of the stream. Only what is served is written: live documents, the
// vectors and chunk rows they hold, their current postings, and the names and terms
// they use. So an erased or redacted document's text, key, tags and vectors, which the
// live index may still hold as dead rows and stale postings until it compacts, are not
// in the file. Graphs are not written: a loaded namespace builds one anew.
func (x *Index) WriteCheckpoint(w io.Writer) error {
	e := &encoder{w: bufio.NewWriterSize(w, 1<<20)}
	e.uint(checkpointVersion)
	spaces := x.spaceList()
	slices.SortFunc(spaces, func(a, b *space) int {
		return cmp.Or(strings.Compare(a.id.Org, b.id.Org), strings.Compare(a.id.Namespace, b.id.Namespace))
	})
	e.uint(uint64(len(spaces)))
	for _, s := range spaces {
		s.mu.RLock()
		s.writeCheckpoint(e)
		s.mu.RUnlock()
		if e.err != nil {
			return fmt.Errorf("write the index checkpoint: %w", e.err)
		}
	}
	if err := e.w.Flush(); err != nil {
		return fmt.Errorf("write the index checkpoint: %w", err)
	}
	return nil
}

// ReadCheckpoint loads what WriteCheckpoint wrote into an index that has applied
// nothing yet (a namespace a waiter created is filled in place, and its waiters are
// woken). size bounds the counts the reader believes (the file's length). On any error
// the index is left as it was.
func (x *Index) ReadCheckpoint(r io.Reader, size int64) error {
	d := &decoder{r: bufio.NewReaderSize(r, 1<<20), size: max(size, 1)}
	if v := d.uint(); d.err == nil && v != checkpointVersion {
		return fmt.Errorf("%w: %d, this build reads %d", ErrCheckpointVersion, v, checkpointVersion)
	}
	n := d.count(2)
	now := time.Now().UnixNano()
	loaded := make([]*space, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		loaded = append(loaded, readSpace(d, now))
	}
	if d.err != nil {
		return fmt.Errorf("read the index checkpoint: %w", d.err)
	}
	for _, l := range loaded {
		s := x.space(l.id, true)
		s.mu.Lock()
		if s.pos != 0 || s.last != 0 || len(s.docs) != 0 {
			s.mu.Unlock()
			return fmt.Errorf("read the index checkpoint: namespace %s was applied before the load", l.id)
		}
		s.mu.Unlock()
	}
	for _, l := range loaded {
		s := x.space(l.id, true)
		s.mu.Lock()
		s.adopt(l)
		s.mu.Unlock()
		// An empty Apply: whatever Apply resets when a namespace changes (what searches
		// keep of it) is reset before the position lets a waiting search through.
		x.Apply(l.id, nil)
		s.mu.Lock()
		if s.pos = l.pos; s.pos > 0 {
			close(s.changed)
			s.changed = make(chan struct{})
		}
		s.mu.Unlock()
	}
	return nil
}

// adopt takes a loaded namespace's state, its position apart.
func (s *space) adopt(l *space) {
	s.held, s.last, s.fenceAll, s.fenceUser = l.held, l.last, l.fenceAll, l.fenceUser
	s.docs, s.cards, s.gens, s.free, s.entries, s.byKey = l.docs, l.cards, l.gens, nil, l.entries, l.byKey
	s.names, s.lexicon, s.post, s.keyPost = l.names, l.lexicon, l.post, l.keyPost
	s.live, s.stale, s.capPost, s.words, s.keyB, s.arenas = l.live, 0, l.capPost, l.words, l.keyB, l.arenas
}

// writeCheckpoint writes one namespace. Holding s.mu (read).
func (s *space) writeCheckpoint(e *encoder) {
	s.writeHeader(e)
	if !s.held {
		return
	}
	u := s.inUse()
	writeRenumbered(e, u.names, &s.names)
	writeRenumbered(e, u.terms, &s.lexicon)
	writeRows(e, u.rows)
	e.uint(uint64(len(u.slots)))
	for _, slot := range u.slots {
		s.writeDoc(e, slot, u)
	}
	s.writePostings(e, u)
}

// writeHeader writes the namespace's name, whether it is held, its position and its
// erasures' fences.
func (s *space) writeHeader(e *encoder) {
	e.str(s.id.Org)
	e.str(s.id.Namespace)
	e.bool(s.held)
	e.int(s.pos)
	e.int(s.last)
	e.int(s.fenceAll)
	users := make([]string, 0, len(s.fenceUser))
	for u := range s.fenceUser {
		users = append(users, u)
	}
	slices.Sort(users)
	e.uint(uint64(len(users)))
	for _, u := range users {
		e.str(u)
		e.int(s.fenceUser[u])
	}
}

// checkpointUse is what a checkpoint writes of a namespace: the live slots, and the
// names and terms they use, each renumbered densely in their order.
type checkpointUse struct {
	slots   []int32
	newSlot []uint32 // slot → its number in the checkpoint
	names   []uint32 // name id → its number in the checkpoint, 0 unused
	terms   []uint32 // term id → its number in the checkpoint, 0 unused
	rows    map[int]int
}

// inUse marks the live slots, the names and terms they use, the terms with a current
// posting, and each dimension's arena rows.
func (s *space) inUse() *checkpointUse {
	u := &checkpointUse{names: make([]uint32, s.names.count()), terms: make([]uint32, s.lexicon.count()), rows: map[int]int{}}
	for slot := range s.docs {
		c, d := &s.cards[slot], &s.docs[slot]
		if !c.has(flagLive) {
			continue
		}
		u.slots = append(u.slots, int32(slot))
		for _, id := range []uint32{c.agent, c.user, c.session, c.memType, d.sensitivity} {
			u.names[id] = 1
		}
		for _, id := range d.tags() {
			u.names[id] = 1
		}
		for _, id := range d.keyTerms() {
			u.terms[id] = 1
		}
		n := int(c.nChunks)
		if c.vecRow >= 0 {
			n++
		}
		if n > 0 {
			u.rows[int(c.dim)] += n
		}
	}
	u.newSlot = make([]uint32, len(s.docs))
	for i, slot := range u.slots {
		u.newSlot[slot] = uint32(i)
	}
	used := func(t uint32, list []posting) {
		for _, p := range list {
			if s.current(p) {
				u.terms[t] = 1
				return
			}
		}
	}
	for t, l := range s.post {
		used(uint32(t), l.slice())
	}
	for t, list := range s.keyPost {
		used(t, list)
	}
	return u
}

// writeRenumbered numbers the used ids of n densely (0 stays the empty name) and
// writes their names in that order.
func writeRenumbered(e *encoder, used []uint32, n *interner) {
	used[0] = 0
	count := 0
	for id := 1; id < len(used); id++ {
		if used[id] != 0 {
			count++
			used[id] = uint32(count)
		}
	}
	e.uint(uint64(count))
	for id := 1; id < len(used); id++ {
		if used[id] != 0 {
			e.str(n.name(uint32(id)))
		}
	}
}

// writeRows writes each dimension's count of arena rows, so the reader sizes them once.
func writeRows(e *encoder, rows map[int]int) {
	dims := make([]int, 0, len(rows))
	for dim := range rows {
		dims = append(dims, dim)
	}
	slices.Sort(dims)
	e.uint(uint64(len(dims)))
	for _, dim := range dims {
		e.uint(uint64(dim))
		e.uint(uint64(rows[dim]))
	}
}

// writeDoc writes one live document: its fields, its vector and chunk rows and, when it
// holds content, its length, tags and key terms.
func (s *space) writeDoc(e *encoder, slot int32, u *checkpointUse) {
	d, c := &s.docs[slot], &s.cards[slot]
	e.str(d.key)
	for _, id := range []uint32{c.agent, c.user, c.session, c.memType, d.sensitivity} {
		e.uint(uint64(u.names[id]))
	}
	e.uint(uint64(c.status))
	e.uint(uint64(c.flags))
	e.raw(d.memoryID[:])
	e.raw(d.sha[:])
	e.int(d.version)
	e.int(d.seq)
	e.int(d.updated)
	e.int(c.expires)
	e.int(c.validTo)
	e.uint(uint64(c.dim))
	a := s.arenas[int(c.dim)]
	e.bool(c.vecRow >= 0)
	if c.vecRow >= 0 {
		e.row(a, c.vecRow)
	}
	e.uint(uint64(c.nChunks))
	for i := int32(0); i < int32(c.nChunks); i++ {
		e.row(a, d.chunkRow+i)
	}
	if !c.has(flagContent) {
		return
	}
	e.uint(uint64(c.docLen))
	e.uint(uint64(d.nTerms))
	e.uint(uint64(d.nTags))
	for _, id := range d.tags() {
		e.uint(uint64(u.names[id]))
	}
	e.uint(uint64(len(d.keyTerms())))
	for _, id := range d.keyTerms() {
		e.uint(uint64(u.terms[id]))
	}
}

// writePostings writes the current postings of the used terms, the lexical lists (with
// their term frequencies) then the key lists, each in term order.
func (s *space) writePostings(e *encoder, u *checkpointUse) {
	var valueTerms, keyTerms []uint32
	for t := range s.post {
		if u.terms[t] != 0 {
			valueTerms = append(valueTerms, uint32(t))
		}
	}
	for t := range s.keyPost {
		if u.terms[t] != 0 {
			keyTerms = append(keyTerms, t)
		}
	}
	slices.Sort(keyTerms)
	s.writeLists(e, u, valueTerms, func(t uint32) []posting { return s.post[t].slice() }, true)
	s.writeLists(e, u, keyTerms, func(t uint32) []posting { return s.keyPost[t] }, false)
}

// writeLists writes the current postings of terms' lists (listFor), with their term
// frequencies when tf.
func (s *space) writeLists(e *encoder, u *checkpointUse, terms []uint32, listFor func(uint32) []posting, tf bool) {
	e.uint(uint64(len(terms)))
	for _, t := range terms {
		list := listFor(t)
		live := 0
		for _, p := range list {
			if s.current(p) {
				live++
			}
		}
		e.uint(uint64(u.terms[t]))
		e.uint(uint64(live))
		for _, p := range list {
			if s.current(p) {
				e.uint(uint64(u.newSlot[p.slot]))
				if tf {
					e.uint(uint64(p.tf))
				}
			}
		}
	}
}

// readSpace reads one namespace written by writeCheckpoint. On a decoding error it
// stops and answers what it read; the caller discards it.
func readSpace(d *decoder, now int64) *space {
	r := spaceReader{d: d, s: readHeader(d, now)}
	s := r.s
	if !s.held || d.err != nil {
		return s
	}
	r.names()
	if !r.arenas() {
		return s
	}
	n := d.count(16)
	s.docs, s.cards, s.gens = make([]doc, n), make([]card, n), make([]slotGen, n)
	for slot := int32(0); int(slot) < n && d.err == nil; slot++ {
		if !r.doc(slot) {
			return s
		}
	}
	r.postings(n)
	return s
}

// readHeader reads what writeHeader wrote into a new space.
func readHeader(d *decoder, now int64) *space {
	s := newSpace(Space{Org: d.str(), Namespace: d.str()}, now)
	s.held = d.bool()
	s.pos, s.last, s.fenceAll = d.int(), d.int(), d.int()
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		u := d.str()
		s.fenceUser[u] = d.int()
	}
	return s
}

// spaceReader reads a held namespace's content into s.
type spaceReader struct {
	d *decoder
	s *space
}

// names reads the names and the terms, each numbered as written.
func (r spaceReader) names() {
	for _, n := range []*interner{&r.s.names, &r.s.lexicon} {
		for count := r.d.count(1); count > 0 && r.d.err == nil; count-- {
			name := r.d.str()
			if before := n.count(); n.id(name) != uint32(before) {
				r.d.fail("a name is listed twice")
			}
		}
	}
}

// name reads a name's number.
func (r spaceReader) name() uint32 {
	id := r.d.uint()
	if id >= uint64(r.s.names.count()) {
		r.d.fail("a name out of range")
		return 0
	}
	return uint32(id)
}

// term reads a term's number.
func (r spaceReader) term() uint32 {
	id := r.d.uint()
	if id == 0 || id >= uint64(r.s.lexicon.count()) {
		r.d.fail("a term out of range")
		return 0
	}
	return uint32(id)
}

// arenas reads each dimension's row count and makes its arena that size.
func (r spaceReader) arenas() bool {
	for dims := r.d.count(2); dims > 0 && r.d.err == nil; dims-- {
		dim, rows := r.d.count(1), r.d.count(1)
		if dim == 0 || dim > math.MaxUint16 {
			r.d.fail("a vector dimension out of range")
			return false
		}
		r.s.arenas[dim] = &arena{dim: dim, codes: make([]int8, 0, rows*dim), scales: make([]float32, 0, rows), owner: make([]uint32, 0, rows)}
	}
	return true
}

// doc reads the document at slot (what writeDoc wrote) and files it under its key.
func (r spaceReader) doc(slot int32) bool {
	d, s := r.d, r.s
	dc, c := &s.docs[slot], &s.cards[slot]
	*dc = doc{key: d.str(), next: -1, chunkRow: -1}
	c.agent, c.user, c.session, c.memType, dc.sensitivity = r.name(), r.name(), r.name(), r.name(), r.name()
	c.status, c.flags = uint8(d.uint()), uint8(d.uint())|flagLive
	d.raw(dc.memoryID[:])
	d.raw(dc.sha[:])
	dc.version, dc.seq, dc.updated = d.int(), d.int(), d.int()
	c.expires, c.validTo = d.int(), d.int()
	if !r.vectors(slot) {
		return false
	}
	if c.has(flagContent) {
		r.content(slot)
	}
	dc.next = s.byKey.push(s.docs, slot)
	s.entries++
	s.keyB += int64(len(dc.key))
	s.setGen(slot)
	return true
}

// vectors reads a document's dimension, its vector and its chunks into their arena.
func (r spaceReader) vectors(slot int32) bool {
	d, dc, c := r.d, &r.s.docs[slot], &r.s.cards[slot]
	c.dim, c.vecRow = uint16(d.uint()), -1
	a := r.s.arenas[int(c.dim)]
	if d.bool() {
		if a == nil {
			d.fail("a vector of an undeclared dimension")
			return false
		}
		c.vecRow = d.row(a, slot)
		a.values++
	}
	c.nChunks = uint8(d.uint())
	if c.nChunks > 0 && a == nil {
		d.fail("a chunk of an undeclared dimension")
		return false
	}
	for i := 0; i < int(c.nChunks); i++ {
		if row := d.row(a, slot); i == 0 {
			dc.chunkRow = row
		}
	}
	return true
}

// content reads a document's length, tags and key terms.
func (r spaceReader) content(slot int32) {
	d, dc, c := r.d, &r.s.docs[slot], &r.s.cards[slot]
	c.docLen, dc.nTerms = uint32(d.uint()), uint16(d.uint())
	nTags := d.count(1)
	d.scratch = d.scratch[:0]
	for i := 0; i < nTags && d.err == nil; i++ {
		d.scratch = append(d.scratch, r.name())
	}
	for k := d.count(1); k > 0 && d.err == nil; k-- {
		d.scratch = append(d.scratch, r.term())
	}
	dc.words, dc.nTags = slices.Clone(d.scratch), uint16(nTags)
	r.s.words += int64(cap(dc.words))
}

// postings reads the lexical lists, then the key lists, over the n documents.
func (r spaceReader) postings(n int) {
	d, s := r.d, r.s
	s.post, s.keyPost = make([]postList, s.lexicon.count()), map[uint32][]posting{}
	for i := range 2 {
		for count := d.count(2); count > 0 && d.err == nil; count-- {
			t := r.term()
			k := d.count(1)
			list := make([]posting, k)
			for j := range list {
				slot := d.uint()
				if slot >= uint64(n) {
					d.fail("a posting out of range")
					return
				}
				list[j] = posting{slot: uint32(slot)}
				if i == 0 {
					list[j].tf = uint16(d.uint())
				} else {
					list[j].tf = keyLen(&s.docs[slot])
				}
			}
			// A checkpoint of a build before lists were kept in slot order.
			if !slices.IsSortedFunc(list, postingOrder) {
				slices.SortStableFunc(list, postingOrder)
			}
			switch {
			case i == 0:
				s.post[t] = listOf(list)
			case k > 0: // a build before key lists were kept for key terms alone wrote every term's
				s.keyPost[t] = list
			}
			s.capPost += int64(k)
			s.live += int64(k)
		}
	}
}

// encoder writes a checkpoint's fields: unsigned varints, zigzag varints, strings with
// their length, raw bytes. The first error sticks.
type encoder struct {
	w   *bufio.Writer
	buf [binary.MaxVarintLen64]byte
	err error
}

func (e *encoder) uint(v uint64) {
	if e.err == nil {
		_, e.err = e.w.Write(binary.AppendUvarint(e.buf[:0], v))
	}
}

func (e *encoder) int(v int64) {
	if e.err == nil {
		_, e.err = e.w.Write(binary.AppendVarint(e.buf[:0], v))
	}
}

func (e *encoder) bool(b bool) {
	if b {
		e.uint(1)
	} else {
		e.uint(0)
	}
}

func (e *encoder) str(s string) {
	e.uint(uint64(len(s)))
	if e.err == nil {
		_, e.err = e.w.WriteString(s)
	}
}

func (e *encoder) raw(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

// row writes an arena row: its codes, then its scale's bits.
func (e *encoder) row(a *arena, r int32) {
	codes := a.row(r)
	e.raw(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(codes))), len(codes)))
	e.raw(binary.LittleEndian.AppendUint32(e.buf[:0], math.Float32bits(a.scales[r])))
}

// decoder reads what encoder wrote. The first error sticks and every read after it
// returns zero values; counts past what a file of size bytes can hold are refused, so
// a damaged length cannot allocate without bound.
type decoder struct {
	r       *bufio.Reader
	size    int64
	err     error
	scratch []uint32
}

func (d *decoder) fail(why string) {
	if d.err == nil {
		d.err = errors.New(why)
	}
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(d.r)
	if err != nil {
		d.err = noEOF(err)
	}
	return v
}

func (d *decoder) int() int64 {
	if d.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(d.r)
	if err != nil {
		d.err = noEOF(err)
	}
	return v
}

func (d *decoder) bool() bool { return d.uint() != 0 }

// count reads a count of items each at least per bytes long.
func (d *decoder) count(per int64) int {
	v := d.uint()
	if v > uint64(d.size/per) {
		d.fail("a count past the file's length")
		return 0
	}
	return int(v)
}

func (d *decoder) str() string {
	n := d.count(1)
	if d.err != nil || n == 0 {
		return ""
	}
	b := make([]byte, n)
	d.raw(b)
	return unsafe.String(unsafe.SliceData(b), n)
}

func (d *decoder) raw(b []byte) {
	if d.err == nil {
		if _, err := io.ReadFull(d.r, b); err != nil {
			d.err = noEOF(err)
		}
	}
}

// row reads an arena row into a and returns its number.
func (d *decoder) row(a *arena, slot int32) int32 {
	if d.err != nil {
		return -1
	}
	if len(a.scales) == cap(a.scales) {
		d.fail("more rows than the namespace declared")
		return -1
	}
	r, n := len(a.scales), len(a.codes)
	a.codes = a.codes[:n+a.dim]
	d.raw(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a.codes[n:]))), a.dim))
	var bits [4]byte
	d.raw(bits[:])
	a.scales = append(a.scales, math.Float32frombits(binary.LittleEndian.Uint32(bits[:])))
	a.owner = append(a.owner, uint32(slot))
	return int32(r)
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
