package projector

import (
	"context"
	"testing"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/tableset"
)

// A copy (a conflict mark) of a document an earlier batch wrote takes that document's
// vectors from what the projector kept, without reading ClickHouse (the connection is
// nil here: a read would fail), while the authority says nothing moved; a copy of other
// content, or of a document kept without a vector, is not carried, as ClickHouse's
// current document would not carry it. Anything that moved (another writer's
// watermark, a gap, a rebuild's switch, an erasure or a redaction in the batch, a
// failed batch) sends the next batch back to ClickHouse.
func TestACopyCarriesTheVectorsTheProjectorKeptWhileNothingMoved(t *testing.T) {
	k := nsKey{"acme", "ns"}
	batchOf := func(seqs ...int64) batch { return batch{seqs: map[nsKey][]int64{k: seqs}} }
	row := func(seq int64, key, sha string, vec events.Vector) opened {
		return opened{env: &events.Envelope{Org: k.org, Namespace: k.namespace, Seq: seq,
			Revision: &events.Revision{Version: seq, Agent: "-", UserID: "u", SessionID: "-", ContentSHA256: sha, EmbeddingDim: 3}},
			content: &events.Content{MemoryKey: key, Embedding: vec, KeyEmbedding: events.Vector{9}}}
	}
	// settled is a keeper whose batch of seqs 1..3 (documents a, b, and c without a
	// vector) moved the watermark from 0 to 3 under serving tables 7.
	settled := func() *keptDocs {
		var c keptDocs
		first := batchOf(1, 2, 3)
		kept := c.take(first, map[nsKey]int64{k: 0}, 7)
		record(kept, []opened{row(1, "a", "sha-a", events.Vector{1, 0, 0}), row(2, "b", "sha-b", events.Vector{0, 1, 0}), row(3, "c", "sha-c", nil)})
		c.settle(first, map[nsKey]int64{k: 0}, map[nsKey]settledMark{k: {0, 3}}, kept, 7)
		return &c
	}
	c := settled()
	next := batchOf(4, 5, 6)
	kept := c.take(next, map[nsKey]int64{k: 3}, 7)
	copies := []opened{row(4, "a", "sha-a", nil), row(5, "b", "sha-other", nil), row(6, "c", "sha-c", nil)}
	carried, missing, err := carryVectors(context.Background(), nil, tableset.Set{}, copies, kept)
	if err != nil {
		t.Fatal(err)
	}
	if got := carried[0]; got == nil || len(got.Embedding) != 3 || got.Embedding[0] != 1 || len(got.KeyEmbedding) != 1 {
		t.Fatalf("the copy of a: %+v, want a's vectors", got)
	}
	if carried[1] != nil || carried[2] != nil || missing != 2 {
		t.Fatalf("carried %v, %d missing: want neither the other content's copy nor the vectorless one carried", carried, missing)
	}
	// The copy as written (with a's vectors) is what the next batch carries from.
	written := append([]opened(nil), copies...)
	written[0].content = carried[0]
	record(kept, written)
	c.settle(next, map[nsKey]int64{k: 3}, map[nsKey]settledMark{k: {3, 6}}, kept, 7)
	if kept := c.take(batchOf(7), map[nsKey]int64{k: 6}, 7); kept[k] == nil || len(kept[k].docs[identityOf(copies[0])].vector) != 3 {
		t.Fatalf("after the copies' batch: %+v, want a's copy kept with its vector", kept[k])
	}

	for _, miss := range []struct {
		name    string
		b       batch
		mark    int64
		serving int
		settled map[nsKey]settledMark
		change  func(map[nsKey]*keptSpace)
	}{
		{"another writer moved the watermark", batchOf(4), 5, 7, nil, nil},
		{"the batch starts past a gap", batchOf(5), 3, 7, nil, nil},
		{"the batch redelivers seqs below the watermark", batchOf(2, 3, 4), 3, 7, nil, nil},
		{"a rebuild switched the serving tables", batchOf(4), 3, 8, nil, nil},
		{"another writer settled during the batch", batchOf(4), 3, 7, map[nsKey]settledMark{k: {5, 5}}, nil},
		{"a redaction in the batch", batchOf(4), 3, 7, map[nsKey]settledMark{k: {3, 4}}, func(kept map[nsKey]*keptSpace) {
			notKept(kept, batch{redactions: []*events.Envelope{{Org: k.org, Namespace: k.namespace, Seq: 4}}}, nil)
		}},
		{"an erasure in the batch", batchOf(4), 3, 7, map[nsKey]settledMark{k: {3, 4}}, func(kept map[nsKey]*keptSpace) {
			notKept(kept, batch{erasures: []*events.Envelope{{Org: k.org, Namespace: k.namespace, Seq: 4}}}, nil)
		}},
	} {
		c := settled()
		kept := c.take(miss.b, map[nsKey]int64{k: miss.mark}, miss.serving)
		if miss.settled == nil {
			if kept[k] != nil {
				t.Errorf("%s: the batch carries from the kept documents, want ClickHouse's", miss.name)
			}
			continue
		}
		if miss.change != nil {
			miss.change(kept)
			// The batch's own copies carry nothing kept either (a nil entry: CI on
			// 8a36871 dereferenced it in TestErasureRaceWithWriters).
			if _, ok := keptDoc(kept, identityOf(copies[0])); ok {
				t.Errorf("%s: a copy in the batch carries a kept document", miss.name)
			}
		}
		c.settle(miss.b, map[nsKey]int64{k: miss.mark}, miss.settled, kept, miss.serving)
		if c.m[k] != nil {
			t.Errorf("%s: documents kept past it", miss.name)
		}
	}
	// A failed batch forgets every namespace's documents (it may have left the tables
	// anywhere between).
	c = settled()
	c.forget()
	if kept := c.take(batchOf(4), map[nsKey]int64{k: 3}, 7); kept[k] != nil {
		t.Fatal("documents outlived forget")
	}
}
