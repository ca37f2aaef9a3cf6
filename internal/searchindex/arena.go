package searchindex

import (
	"math"

	"github.com/loomplane/loom/internal/hnsw"
)

// arena holds a namespace's vectors of one dimension as int8 codes, append only: a
// document that changes its vector takes a new row and its old one is dead until the
// arena is compacted. Rows never change once written, so a graph build reads a
// snapshot of the arena without holding the namespace's lock.
type arena struct {
	dim    int
	codes  []int8    // rows × dim
	scales []float32 // per row
	owner  []uint32  // per row: the slot that wrote it
	dead   int
	values int // live value rows
	// graphDead counts the graph's nodes whose row died since it was built.
	graphDead int
	epoch     int // bumped by every compaction: rows are renumbered
	graph     *hnsw.Graph
}

func (a *arena) rows() int { return len(a.scales) }

func (a *arena) row(r int32) []int8 { return a.codes[int(r)*a.dim : int(r+1)*a.dim] }

// warm reads a byte of every cache line of rows and their scales, loads that do not
// wait for each other, and returns what it read (for runtime.KeepAlive).
func (a *arena) warm(rows []int32) int8 {
	var sum int8
	for _, r := range rows {
		row := a.row(r)
		for i := 0; i < len(row); i += 64 {
			sum += row[i]
		}
		sum += int8(math.Float32bits(a.scales[r]))
	}
	return sum
}

// add appends a vector and returns its row.
func (a *arena) add(v []float32, slot int32) int32 {
	r, n := len(a.scales), len(a.codes)
	if n+a.dim > cap(a.codes) {
		// Grow by an eighth, not the runtime's quarter or double: the arena is most of
		// the index's memory. A small arena doubles (from 8 rows, up to 256 at a time), so
		// that many small namespaces do not each hold hundreds of empty rows.
		rows := r + max(r/8, min(max(r, 8), 256))
		a.codes = append(make([]int8, 0, rows*a.dim), a.codes...)
		a.scales = append(make([]float32, 0, rows), a.scales...)
		a.owner = append(make([]uint32, 0, rows), a.owner...)
	}
	a.codes = a.codes[:n+a.dim]
	a.scales = append(a.scales, hnsw.Quantise(v, a.codes[n:]))
	a.owner = append(a.owner, uint32(slot))
	return int32(r)
}

// bytes is what the arena's arrays hold, their spare capacity included.
func (a *arena) bytes() int64 {
	b := int64(cap(a.codes)) + 4*int64(cap(a.scales)) + 4*int64(cap(a.owner))
	if a.graph != nil {
		b += a.graph.Bytes()
	}
	return b
}

// needsCompaction: more dead rows than live ones.
func (a *arena) needsCompaction() bool { return a.dead > 1024 && a.dead > a.rows()-a.dead }

// compact copies the live rows of docs into fresh arrays and renumbers them. The graph
// goes with the old numbering.
func (s *space) compact(a *arena) {
	live := a.rows() - a.dead
	codes := make([]int8, 0, live*a.dim)
	scales := make([]float32, 0, live)
	owner := make([]uint32, 0, live)
	move := func(r int32, slot int32) int32 {
		n := int32(len(scales))
		codes = append(codes, a.row(r)...)
		scales = append(scales, a.scales[r])
		owner = append(owner, uint32(slot))
		return n
	}
	for slot := range s.docs {
		d := &s.docs[slot]
		c := &s.cards[slot]
		if int(c.dim) != a.dim {
			continue
		}
		if c.vecRow >= 0 {
			c.vecRow = move(c.vecRow, int32(slot))
		}
		if c.nChunks > 0 {
			first := int32(-1)
			for i := int32(0); i < int32(c.nChunks); i++ {
				n := move(d.chunkRow+i, int32(slot))
				if i == 0 {
					first = n
				}
			}
			d.chunkRow = first
		}
	}
	a.codes, a.scales, a.owner, a.dead = codes, scales, owner, 0
	a.epoch++
	a.graph, a.graphDead = nil, 0
}
