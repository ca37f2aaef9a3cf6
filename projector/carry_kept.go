package projector

import (
	"sync"

	"github.com/loomplane/loom/events"
)

// keptDocs keeps, per namespace, the search documents (content hash and vectors) this
// projector wrote, so that a later batch's copies carry their vectors from memory
// rather than reading them back from ClickHouse (a conflict writes ~4.5 copies an add,
// each a document written a few batches before). The rule is chainHeads': a
// namespace's documents stand for its current ones in ClickHouse at the watermark the
// batch that left them settled, under the serving generation of then; a batch whose
// watermark at its start is that one, whose first seq follows it, and whose serving
// tables are the same, uses them; any other writer of the namespace (a rebalance, the
// repair pass, a reset) moves the watermark, a rebuild's switch the generation. A
// batch takes its namespaces' documents out of the keeper while it runs, so two
// batches never share them, and puts them back only if it settled cleanly without an
// erasure, a redaction or a sealed revision of the namespace. A document not kept is
// read from ClickHouse, as before.
type keptDocs struct {
	mu     sync.Mutex
	m      map[nsKey]*keptSpace
	floats int // the floats the kept documents hold, against keptFloatsMax
}

// keptFloatsMax bounds the kept vectors (32 MiB of float32s); past it the keeper
// starts over. A namespace of 10,000 documents at 256 dimensions and a key vector
// holds 5 M.
const keptFloatsMax = 8 << 20

// keptSpace is one namespace's kept documents, current at watermark.
type keptSpace struct {
	watermark int64
	serving   int
	docs      map[identity]storedDoc // vectors empty when the document holds none
	floats    int
}

// take removes the batch's namespaces from the keeper and returns those the batch may
// use: kept at the watermark it starts from (marks), under the same serving tables, its
// first seq the next. The map also receives the documents the batch writes (record).
func (c *keptDocs) take(b batch, marks map[nsKey]int64, serving int) map[nsKey]*keptSpace {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[nsKey]*keptSpace{}
	for k, seqs := range b.seqs {
		s, ok := c.m[k]
		if !ok {
			continue
		}
		delete(c.m, k)
		c.floats -= s.floats
		if s.serving == serving && s.watermark == marks[k] && minSeq(seqs) == s.watermark+1 {
			out[k] = s
		}
	}
	return out
}

// record notes the documents a batch wrote, rows in write order (a later row of an
// identity replaces an earlier one, as the batch's own copies take them).
func record(kept map[nsKey]*keptSpace, rows []opened) {
	for _, o := range rows {
		k := nsKey{o.env.Org, o.env.Namespace}
		s, ok := kept[k]
		switch {
		case !ok:
			s = &keptSpace{docs: map[identity]storedDoc{}}
			kept[k] = s
		case s == nil:
			continue // notKept
		}
		id := identityOf(o)
		s.floats -= docFloats(s.docs[id])
		d := storedDoc{sha: o.env.Revision.ContentSHA256}
		if c := o.content; c != nil {
			d.vector, d.keyVe = c.Embedding, c.KeyEmbedding
		}
		s.docs[id] = d
		s.floats += docFloats(d)
	}
}

// keptDoc is the document of id kept from an earlier batch, if the batch may use it: a
// namespace none were kept of, or that the batch does not keep past it (notKept marks
// it nil), has none.
func keptDoc(kept map[nsKey]*keptSpace, id identity) (storedDoc, bool) {
	s := kept[nsKey{id.org, id.namespace}]
	if s == nil {
		return storedDoc{}, false
	}
	d, ok := s.docs[id]
	return d, ok
}

func docFloats(d storedDoc) int { return len(d.vector) + len(d.keyVe) }

// settle puts back the documents of each namespace the batch moved from the watermark
// it read at its start through its last seq; the rest, and those marked nil (removing),
// are dropped.
func (c *keptDocs) settle(b batch, marks map[nsKey]int64, settled map[nsKey]settledMark, kept map[nsKey]*keptSpace, serving int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, seqs := range b.seqs {
		s, ok := settled[k]
		sp := kept[k]
		if sp == nil || !ok || s.from != marks[k] || s.to != maxSeq(seqs) || s.to <= s.from {
			continue
		}
		if c.m == nil {
			c.m = map[nsKey]*keptSpace{}
		}
		sp.watermark, sp.serving = s.to, serving
		c.m[k] = sp
		c.floats += sp.floats
	}
	if c.floats > keptFloatsMax {
		c.m, c.floats = nil, 0
	}
}

// forget drops every kept namespace (a batch that failed may have left the tables
// anywhere between).
func (c *keptDocs) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m, c.floats = nil, 0
}

// notKept marks, in kept, the namespaces of a batch whose records remove content (an
// erasure, a redaction, an erasure saga's row) or whose revisions' keys are gone
// (keyless): their documents are neither used nor kept past it.
func notKept(kept map[nsKey]*keptSpace, b batch, keyless []*events.Envelope) {
	for _, f := range b.fences {
		kept[nsKey{f.Org, f.Namespace}] = nil
	}
	for _, list := range [][]*events.Envelope{b.redactions, b.erasures, b.audited, keyless} {
		for _, env := range list {
			kept[nsKey{env.Org, env.Namespace}] = nil
		}
	}
}
