package projector

import (
	"errors"
	"fmt"
	"testing"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/erasure"
)

func refs(seqs ...int64) []recordRef {
	out := make([]recordRef, len(seqs))
	for i, s := range seqs {
		out[i] = recordRef{seq: s, topic: "t", partition: 1, offset: 100 + int64(i)}
	}
	return out
}

// A namespace's share past its watermark becomes failures: the failed seqs with their
// reason, the rest held; seqs the watermark covers are left out, and of two copies of
// a seq the later is kept.
func TestFailuresOf(t *testing.T) {
	k := nsKey{"acme", "support"}
	fs := failuresOf(k, refs(4, 5, 6, 7, 6), 4, map[int64]string{6: "bad"}, "held")
	if len(fs) != 3 {
		t.Fatalf("%d failures, want seqs 5, 6, 7: %+v", len(fs), fs)
	}
	want := []struct {
		seq    int64
		held   bool
		reason string
		offset int64
	}{{5, true, "held", 101}, {6, false, "bad", 104}, {7, true, "held", 103}}
	for i, w := range want {
		f := fs[i]
		if f.ns != k || f.ref.seq != w.seq || f.held != w.held || f.reason != w.reason || f.ref.offset != w.offset {
			t.Errorf("failure %d: %+v, want %+v", i, f, w)
		}
	}
	long := allFailed(k, refs(9), 0, string(make([]byte, 5000)))
	if len(long) != 1 || long[0].held || len(long[0].reason) != maxReason {
		t.Fatalf("a long reason: %+v", long)
	}
	if got := allFailed(k, refs(1, 2), 2, "x"); len(got) != 0 {
		t.Fatalf("a share the watermark covers: %+v", got)
	}
}

func env(org, ns string, seq int64, typ events.Type) *events.Envelope {
	return &events.Envelope{ID: events.RecordID(org, ns, seq), Org: org, Namespace: ns, Seq: seq, Type: typ}
}

// A namespace with a record its key does not open leaves the batch whole, past its
// watermark; one at or below the watermark is only skipped.
func TestSetAside(t *testing.T) {
	a, b := nsKey{"acme", "a"}, nsKey{"acme", "b"}
	bt := batch{seqs: map[nsKey][]int64{a: {3, 4, 5}, b: {1, 2}}, refs: map[nsKey][]recordRef{a: refs(3, 4, 5), b: refs(1, 2)},
		jumps: map[nsKey]map[int64]bool{a: {5: true}}}
	for _, k := range []nsKey{a, b} {
		for _, s := range bt.seqs[k] {
			bt.revisions = append(bt.revisions, env(k.org, k.namespace, s, events.TypeWritten))
		}
	}
	bt.fences = []erasure.Fence{{Org: "acme", Namespace: "a", Seq: 5}}
	var rows []opened
	for _, e := range bt.revisions {
		rows = append(rows, opened{env: e, content: &events.Content{}})
	}
	bad := []unopened{{env: env("acme", "a", 4, events.TypeWritten), err: errors.New("tag mismatch")},
		{env: env("acme", "b", 1, events.TypeWritten), err: errors.New("tag mismatch")}}
	marks := map[nsKey]int64{a: 2, b: 1}
	kept, keptRows, fs, skipped := setAside(bt, rows, bad, marks)
	if skipped != 1 {
		t.Fatalf("skipped %d, want b's seq 1, which its watermark covers", skipped)
	}
	if _, ok := kept.seqs[a]; ok || len(kept.fences) != 0 || len(kept.jumps) != 0 || fmt.Sprint(kept.seqs[b]) != "[1 2]" {
		t.Fatalf("the batch kept %+v", kept)
	}
	for _, o := range keptRows {
		if o.env.Namespace == "a" {
			t.Fatalf("a's row %d was kept", o.env.Seq)
		}
	}
	if len(keptRows) != 2 || len(kept.revisions) != 2 {
		t.Fatalf("kept %d rows, %d revisions; want b's 2", len(keptRows), len(kept.revisions))
	}
	if len(fs) != 3 || !fs[0].held || fs[1].held || fs[1].ref.seq != 4 || !fs[2].held || fs[0].reason != heldBehind(4) {
		t.Fatalf("failures %+v: want 3 held behind 4, 4 failed, 5 held", fs)
	}
}
