package searchindex

import "hash/maphash"

// keyTable finds the first slot holding a memory key (the documents chain the others
// holding it through doc.next). It is open addressing over slots, linear probing, at
// most three quarters full, and compares keys through the documents, which hold them
// anyway: about 5 to 11 bytes a key where a map[string]int32 cost some 40, at a
// namespace of a few hundred memories most of what a memory cost beyond its vector and
// its document.
type keyTable struct {
	cells []uint32 // 0: empty; else a slot + 1, placed by its document's key's hash
	n     int
	seed  maphash.Seed
}

func newKeyTable() keyTable { return keyTable{seed: maphash.MakeSeed()} }

// len is how many keys the table holds.
func (t *keyTable) len() int { return t.n }

// bytes is what the table's array holds.
func (t *keyTable) bytes() int64 { return 4 * int64(cap(t.cells)) }

func (t *keyTable) home(key string) uint64 {
	return maphash.String(t.seed, key) & uint64(len(t.cells)-1)
}

// find returns the cell holding key, or that it holds none.
func (t *keyTable) find(docs []doc, key string) (uint64, bool) {
	if t.n == 0 {
		return 0, false
	}
	mask := uint64(len(t.cells) - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		c := t.cells[i]
		if c == 0 {
			return 0, false
		}
		if docs[c-1].key == key {
			return i, true
		}
	}
}

// head returns the first slot holding key.
func (t *keyTable) head(docs []doc, key string) (int32, bool) {
	i, ok := t.find(docs, key)
	if !ok {
		return -1, false
	}
	return int32(t.cells[i] - 1), true
}

// push makes slot the first holding its document's key and answers the slot that was
// (-1 for none), in one probe.
func (t *keyTable) push(docs []doc, slot int32) int32 {
	key := docs[slot].key
	if i, ok := t.find(docs, key); ok {
		prev := int32(t.cells[i] - 1)
		t.cells[i] = uint32(slot) + 1
		return prev
	}
	if 4*(t.n+1) > 3*len(t.cells) {
		t.grow(docs)
	}
	t.place(docs, uint32(slot)+1)
	t.n++
	return -1
}

// place puts a cell in the first free one from its key's hash.
func (t *keyTable) place(docs []doc, c uint32) {
	mask := uint64(len(t.cells) - 1)
	i := t.home(docs[c-1].key)
	for t.cells[i] != 0 {
		i = (i + 1) & mask
	}
	t.cells[i] = c
}

func (t *keyTable) grow(docs []doc) {
	old := t.cells
	t.cells = make([]uint32, max(8, 2*len(old)))
	for _, c := range old {
		if c != 0 {
			t.place(docs, c)
		}
	}
}

// delete forgets key. The cells after it that probed past it move back (backward-shift
// deletion), so no lookup stops early at the emptied cell.
func (t *keyTable) delete(docs []doc, key string) {
	i, ok := t.find(docs, key)
	if !ok {
		return
	}
	t.n--
	mask := uint64(len(t.cells) - 1)
	for {
		t.cells[i] = 0
		j := i
		for {
			j = (j + 1) & mask
			c := t.cells[j]
			if c == 0 {
				return
			}
			// The cell at j stays when its home lies cyclically in (i, j].
			h := t.home(docs[c-1].key)
			if (i < j && (h <= i || h > j)) || (i > j && h <= i && h > j) {
				t.cells[i] = c
				i = j
				break
			}
		}
	}
}
