package hnsw

// TopK keeps the k best (id, similarity) pairs offered.
type TopK struct {
	k int
	h candHeap
}

// NewTopK returns an empty TopK of k.
func NewTopK(k int) *TopK { return &TopK{k: k, h: candHeap{items: make([]Cand, 0, k+1)}} }

// Offer keeps id if it is among the k best so far.
func (t *TopK) Offer(id uint32, sim float32) {
	if t.h.len() < t.k {
		t.h.push(Cand{id, sim})
	} else if sim > t.h.peek().Sim {
		t.h.items[0] = Cand{id, sim}
		t.h.push(t.h.pop()) // restore the heap with the replaced root
	}
}

// IDs is what was kept, in no order.
func (t *TopK) IDs() []uint32 {
	out := make([]uint32, t.h.len())
	for i, c := range t.h.items {
		out[i] = c.Node
	}
	return out
}

// Kept is what was kept with the similarities, in no order.
func (t *TopK) Kept() []Cand { return append([]Cand(nil), t.h.items...) }
