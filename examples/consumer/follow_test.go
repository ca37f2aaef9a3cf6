package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
)

func record(t *testing.T, typ events.Type, seq int64, offset int64) *kgo.Record {
	t.Helper()
	e := &events.Envelope{Version: events.EnvelopeVersion, ID: events.RecordID("acme", "support", seq), Type: typ,
		Org: "acme", Namespace: "support", Seq: seq, CommittedAt: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
	if typ == events.TypeErased {
		e.Erasure = &events.Erasure{ID: "e1", Scope: events.ErasureScopeUser, UserRef: strings.Repeat("ab", 32), Generation: seq, Withdrawn: 1}
	}
	b, err := events.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Key: events.RecordKey("acme", "support"), Value: b, Partition: 0, Offset: offset}
}

// Records past a gap are held, their offsets uncommitted, until the missing seqs
// arrive, or an erasure's record says they were withdrawn: then they are handled in
// seq order, before the erasure.
func TestHeldRecordsAreHandledWhenTheGapCloses(t *testing.T) {
	var out strings.Builder
	h := &handler{seen: &seen{seqs: map[string]int64{}}, out: &out, held: map[string][]heldRecord{}}
	parked := events.TypeParked
	recs := []*kgo.Record{record(t, parked, 1, 10), record(t, parked, 3, 11), record(t, parked, 5, 12)}
	for _, r := range recs {
		h.handle(context.Background(), r)
	}
	if got := h.settled(recs); len(got) != 1 || got[0].Offset != 10 {
		t.Fatalf("settled %d records, want the one before the gap", len(got))
	}
	// seq 2 arrives (a record published again): 2 and 3 go; 4 was withdrawn by the
	// erasure at 6, whose record releases 5.
	more := []*kgo.Record{record(t, parked, 2, 13), record(t, events.TypeErased, 6, 14)}
	for _, r := range more {
		h.handle(context.Background(), r)
	}
	var order []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(l, "gap ") {
			order = append(order, strings.Fields(l)[0])
		}
	}
	want := "acme/support/1 acme/support/2 acme/support/3 acme/support/5 acme/support/6"
	if strings.Join(order, " ") != want {
		t.Fatalf("handled %v, want %s\n%s", order, want, out.String())
	}
	if got := h.settled(more); len(got) != 2 || h.seen.last("acme", "support") != 6 {
		t.Fatalf("after the erasure: %d settled, last %d", len(got), h.seen.last("acme", "support"))
	}
}
