package projector

import (
	"testing"

	"github.com/loomplane/loom/internal/auditchain"
)

// The projector continues a namespace's audit chain from the hash it kept only while
// the authority says nothing moved: the namespace's watermark is the one its last
// batch settled, the batch starts at the next seq, and the same tables serve. A
// watermark moved by another writer, a batch that starts elsewhere (a redelivery, a
// gap), a rebuild's switch, a batch written unchained or a failed batch each send the
// next batch back to ClickHouse for the last hash.
func TestAChainHeadIsKeptOnlyWhileTheAuthoritySaysNothingMoved(t *testing.T) {
	k := nsKey{"acme", "ns"}
	batchOf := func(seqs ...int64) batch { return batch{seqs: map[nsKey][]int64{k: seqs}} }
	row := func(seq uint64, hash string) *auditRow {
		return &auditRow{Row: auditchain.Row{Org: k.org, Namespace: k.namespace, Seq: seq, RowHash: hash}}
	}
	// A batch of seqs 1..3 that moved the watermark from 0 to 3 keeps its last row's hash.
	var c chainHeads
	c.settle(batchOf(1, 2, 3), map[nsKey]int64{k: 0}, map[nsKey]settledMark{k: {0, 3}}, []*auditRow{row(1, "h1"), row(3, "h3")}, 7, true)
	next := batchOf(4, 5)
	if got := c.prevs(next, map[nsKey]int64{k: 3}, 7); got[k] != "h3" {
		t.Fatalf("the next batch continues from %v, want h3", got)
	}
	for _, miss := range []struct {
		name    string
		b       batch
		mark    int64
		serving int
	}{
		{"another writer moved the watermark", next, 5, 7},
		{"the batch starts past a gap", batchOf(5, 6), 3, 7},
		{"the batch redelivers seqs below the watermark", batchOf(2, 3, 4), 3, 7},
		{"a rebuild switched the serving tables", next, 3, 8},
	} {
		if got, ok := c.prevs(miss.b, map[nsKey]int64{k: miss.mark}, miss.serving)[k]; ok {
			t.Errorf("%s: the batch continues from the kept %q, want ClickHouse's last hash", miss.name, got)
		}
	}
	// A batch with no audit row (turns observed) keeps the head, one step on.
	c.settle(batchOf(4), map[nsKey]int64{k: 3}, map[nsKey]settledMark{k: {3, 4}}, nil, 7, true)
	if got := c.prevs(batchOf(5), map[nsKey]int64{k: 4}, 7); got[k] != "h3" {
		t.Fatalf("after a batch without audit rows: %v, want h3", got)
	}
	// Another writer settled the watermark between this batch's start and its
	// settlement: the head is forgotten.
	c.settle(batchOf(5), map[nsKey]int64{k: 4}, map[nsKey]settledMark{k: {6, 6}}, []*auditRow{row(5, "h5")}, 7, true)
	if got, ok := c.prevs(batchOf(7), map[nsKey]int64{k: 6}, 7)[k]; ok {
		t.Fatalf("after another writer's batch: continues from %q", got)
	}
	// A batch written unchained keeps nothing; nor does a failed one.
	c.settle(batchOf(7), map[nsKey]int64{k: 6}, map[nsKey]settledMark{k: {6, 7}}, []*auditRow{row(7, "")}, 7, false)
	if _, ok := c.prevs(batchOf(8), map[nsKey]int64{k: 7}, 7)[k]; ok {
		t.Fatal("a batch written unchained left a head")
	}
	c.settle(batchOf(8), map[nsKey]int64{k: 7}, map[nsKey]settledMark{k: {7, 8}}, []*auditRow{row(8, "h8")}, 7, true)
	c.forget()
	if _, ok := c.prevs(batchOf(9), map[nsKey]int64{k: 8}, 7)[k]; ok {
		t.Fatal("a head outlived forget")
	}
}
