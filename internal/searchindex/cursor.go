package searchindex

import "math"

// cursor walks one term's postings, which lie in slot order, for a leg that reads
// its lists together document by document.
type cursor struct {
	list []posting
	at   int
}

const endSlot = math.MaxUint32

// slot is the slot the cursor is at, endSlot past the end.
func (c *cursor) slot() uint32 {
	if c.at < len(c.list) {
		return c.list[c.at].slot
	}
	return endSlot
}

// least is the least slot the cursors are at, endSlot when all are past their ends.
func least(curs []cursor) uint32 {
	slot := uint32(endSlot)
	for i := range curs {
		slot = min(slot, curs[i].slot())
	}
	return slot
}

// seek moves to the first posting at or past slot. It gallops: a leg that skips a
// long list's documents jumps over most of them.
func (c *cursor) seek(slot uint32) {
	l := c.list
	if c.at >= len(l) || l[c.at].slot >= slot {
		return
	}
	lo, step := c.at, 1 // l[lo].slot < slot
	for lo+step < len(l) && l[lo+step].slot < slot {
		lo += step
		step *= 2
	}
	hi := min(lo+step, len(l)) // l[hi].slot >= slot, or hi is the end
	for lo+1 < hi {
		mid := int(uint(lo+hi) >> 1)
		if l[mid].slot < slot {
			lo = mid
		} else {
			hi = mid
		}
	}
	c.at = hi
}

// take moves past slot's postings at the cursor and returns its current one and how
// many current ones it has (a key term the key holds twice has two).
func (c *cursor) take(s *space, slot uint32) (p posting, n int) {
	for ; c.at < len(c.list) && c.list[c.at].slot == slot; c.at++ {
		if q := c.list[c.at]; s.current(q) {
			p, n = q, n+1
		}
	}
	return p, n
}

// find reports slot's current posting in list, without a cursor.
func find(s *space, list []posting, slot uint32) (posting, bool) {
	c := cursor{list: list}
	c.seek(slot)
	p, n := c.take(s, slot)
	return p, n > 0
}
