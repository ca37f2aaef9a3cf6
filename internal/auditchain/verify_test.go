package auditchain

import (
	"fmt"
	"testing"
	"time"
)

func chain(n int) []Row {
	rows := make([]*Row, n)
	for i := range rows {
		rows[i] = &Row{Org: "o", Namespace: "n", Seq: uint64(i + 1), Op: "memory.set", EventType: "memory.written",
			OccurredAt: time.Unix(int64(1000+i), 0), Actor: "token:a", MemoryID: "00000000-0000-0000-0000-000000000001", Version: uint64(i + 1)}
	}
	Link("", rows)
	out := make([]Row, n)
	for i, r := range rows {
		out[i] = *r
	}
	return out
}

func walk(rows []Row, maxPurge uint64, cps []Checkpoint) *Break {
	w := NewWalker("o", "n", maxPurge, cps)
	for _, r := range rows {
		if b := w.Step(r); b != nil {
			return b
		}
	}
	return w.Finish()
}

func TestTheWalkNamesTheFirstBrokenLink(t *testing.T) {
	rows := chain(5)
	cp := Checkpoint{Org: "o", Namespace: "n", Seq: 4, RowHash: rows[3].RowHash}
	cp.Hash = CheckpointHash("", "o", "n", 4, cp.RowHash)
	if b := walk(rows, 0, []Checkpoint{cp}); b != nil {
		t.Fatalf("an untouched chain: %v", b)
	}
	changed := append([]Row(nil), rows...)
	changed[2].Actor = "mallory"
	if b := walk(changed, 0, nil); b == nil || b.Seq != 3 {
		t.Fatalf("a changed row: %v, want seq 3", b)
	}
	// A row rehashed after its change breaks the link of the next one.
	changed[2].RowHash = Hash(changed[2].PrevHash, changed[2])
	if b := walk(changed, 0, nil); b == nil || b.Seq != 4 {
		t.Fatalf("a rehashed row: %v, want seq 4", b)
	}
	// The whole chain rewritten after the change still misses its checkpoint.
	rewritten := append([]Row(nil), changed...)
	prev := rewritten[2].RowHash
	for i := 3; i < 5; i++ {
		rewritten[i].PrevHash = prev
		rewritten[i].RowHash = Hash(prev, rewritten[i])
		prev = rewritten[i].RowHash
	}
	if b := walk(rewritten, 0, []Checkpoint{cp}); b == nil || b.Seq != 4 {
		t.Fatalf("a rewritten chain: %v, want the checkpoint at seq 4", b)
	}
	// A removed row is a break, unless a purge above it explains the gap.
	gap := append(append([]Row(nil), rows[:1]...), rows[2:]...)
	if b := walk(gap, 0, nil); b == nil || b.Seq != 3 {
		t.Fatalf("a removed row: %v, want seq 3", b)
	}
	if b := walk(gap, 5, nil); b != nil {
		t.Fatalf("a row a purge removed: %v", b)
	}
}

// A record that carries a write's own audit row (a bulk write's batch) leaves two rows
// at its seq, chained in op order; a checkpoint names the second.
func TestASeqOfTwoRowsChainsAndCheckpoints(t *testing.T) {
	base := chain(3)
	rows := make([]*Row, 0, 4)
	for i := range base {
		r := base[i]
		rows = append(rows, &r)
	}
	batch := *rows[2]
	batch.Op, batch.EventType, batch.Detail = "memory.bulk_set.batch", "audit.batch", `{"members":["a","b"]}`
	rows = append(rows, &batch)
	Link("", rows)
	walked := make([]Row, len(rows))
	for i, r := range rows {
		walked[i] = *r
	}
	cp := Checkpoint{Org: "o", Namespace: "n", Seq: 3, RowHash: walked[3].RowHash}
	cp.Hash = CheckpointHash("", "o", "n", 3, cp.RowHash)
	if b := walk(walked, 0, []Checkpoint{cp}); b != nil {
		t.Fatalf("an untouched chain: %v", b)
	}
	changed := append([]Row(nil), walked...)
	changed[3].Detail = `{"members":["a"]}`
	if b := walk(changed, 0, []Checkpoint{cp}); b == nil || b.Seq != 3 {
		t.Fatalf("a changed detail: %v, want seq 3", b)
	}
	// The batch row rehashed after its change misses the checkpoint at its seq.
	changed[3].RowHash = Hash(changed[3].PrevHash, changed[3])
	if b := walk(changed, 0, []Checkpoint{cp}); b == nil || b.Seq != 3 {
		t.Fatalf("a rehashed batch row: %v, want the checkpoint at seq 3", b)
	}
	// The batch row removed: the checkpoint's row is missing.
	if b := walk(walked[:3], 0, []Checkpoint{cp}); b == nil || b.Seq != 3 {
		t.Fatalf("a removed batch row: %v, want seq 3", b)
	}
}

// A row's subject blanked whole (key, content hash, user id and salt), as an erasure's
// scrub leaves it, holds only below a row that explains it: an erasure of the
// namespace, or a redaction of the same memory. Blanked by hand with neither after it,
// the walk breaks at the first such row when it ends.
func TestABlankedSubjectNeedsAnErasureOrARedactionAfterIt(t *testing.T) {
	const memA, memB = "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b"
	salt := SubjectSalt([]byte("0123456789abcdef0123456789abcdef"), "o/n/1")
	row := func(seq uint64, op, event, memoryID string, blank bool) *Row {
		r := &Row{Org: "o", Namespace: "n", Seq: seq, Op: op, EventType: event, OccurredAt: time.Unix(int64(1000+seq), 0),
			Actor: "token:a", MemoryID: memoryID, Version: seq}
		if op == OpErasure {
			r.Actor, r.Status = "-", StatusScrubbed
			return r
		}
		key := fmt.Sprintf("k%d", seq)
		r.SubjectCommitment = SubjectCommitment(salt, key, "sha", "alice")
		if !blank {
			r.Subject = Subject{MemoryKey: key, ContentSHA256: "sha", UserID: "alice", Salt: salt}
		}
		return r
	}
	linked := func(rows ...*Row) []Row {
		Link("", rows)
		out := make([]Row, len(rows))
		for i, r := range rows {
			out[i] = *r
		}
		return out
	}
	for _, tc := range []struct {
		name string
		rows []Row
		want uint64 // the seq the walk breaks at; 0: it holds
	}{
		{"kept", linked(row(1, "memory.set", "memory.written", memA, false), row(2, "memory.set", "memory.written", memB, false)), 0},
		{"blanked, nothing after", linked(row(1, "memory.set", "memory.written", memA, false), row(2, "memory.set", "memory.written", memB, true),
			row(3, "memory.set", "memory.written", memA, true)), 2},
		{"blanked below an erasure", linked(row(1, "memory.set", "memory.written", memA, true), row(2, "memory.set", "memory.written", memB, true),
			row(3, OpErasure, EventErased, "", false)), 0},
		{"blanked after the erasure", linked(row(1, "memory.set", "memory.written", memA, true), row(2, OpErasure, EventErased, "", false),
			row(3, "memory.set", "memory.written", memB, true)), 3},
		{"blanked below its memory's redaction", linked(row(1, "memory.set", "memory.written", memA, true),
			row(2, "memory.redact", EventRedacted, memA, true)), 0},
		{"blanked below another memory's redaction", linked(row(1, "memory.set", "memory.written", memB, true),
			row(2, "memory.set", "memory.written", memA, false), row(3, "memory.redact", EventRedacted, memA, true)), 1},
	} {
		b := walk(tc.rows, 0, nil)
		switch {
		case tc.want == 0 && b != nil:
			t.Errorf("%s: %v, want the chain whole", tc.name, b)
		case tc.want != 0 && (b == nil || b.Seq != tc.want):
			t.Errorf("%s: %v, want a break at seq %d", tc.name, b, tc.want)
		}
	}
}

// A chain whose rows moved to FormatWriter after rows of FormatV1 verifies, and still
// does once an erasure scrubbed the FormatWriter rows' agents and sessions with their
// subjects; the FormatV1 rows keep theirs, which their hashes cover. A FormatWriter
// row's agent or session changed (not scrubbed whole), or a FormatV1 row's agent
// scrubbed, breaks it.
func TestAWriterFormatChainVerifiesBeforeAndAfterItsScrub(t *testing.T) {
	salt := SubjectSalt([]byte("0123456789abcdef0123456789abcdef"), "o/n/1")
	var rows []*Row
	for seq := uint64(1); seq <= 4; seq++ {
		key := fmt.Sprintf("k%d", seq)
		r := &Row{Org: "o", Namespace: "n", Seq: seq, Op: "memory.set", EventType: "memory.written", OccurredAt: time.Unix(int64(1000+seq), 0),
			Actor: "token:a", Agent: "travel-bot", SessionID: "s-9", MemoryID: "00000000-0000-0000-0000-00000000000a", Version: seq,
			Subject: Subject{MemoryKey: key, ContentSHA256: "sha", UserID: "alice", Salt: salt}}
		if seq <= 2 {
			r.Format, r.SubjectCommitment = FormatV1, SubjectCommitment(salt, key, "sha", "alice")
		} else {
			r.Format, r.SubjectCommitment = FormatWriter, WriterSubjectCommitment(salt, key, "sha", "alice", "travel-bot", "s-9")
		}
		rows = append(rows, r)
	}
	rows = append(rows, &Row{Org: "o", Namespace: "n", Seq: 5, Op: OpErasure, EventType: EventErased, OccurredAt: time.Unix(1005, 0),
		Actor: "-", MemoryID: "00000000-0000-0000-0000-000000000000", Status: StatusScrubbed, Format: FormatWriter})
	Link("", rows)
	kept := make([]Row, len(rows))
	for i, r := range rows {
		kept[i] = *r
	}
	asV1 := kept[2]
	asV1.Format = FormatV1
	if Hash(kept[2].PrevHash, kept[2]) == Hash(kept[2].PrevHash, asV1) {
		t.Fatal("a row hashes alike in both formats")
	}
	if b := walk(kept, 0, nil); b != nil {
		t.Fatalf("an untouched chain: %v", b)
	}
	// The erasure's scrub: every row loses its subject; the FormatWriter rows their
	// agent and session too.
	scrubbed := append([]Row(nil), kept...)
	for i := range scrubbed[:4] {
		scrubbed[i].Subject = Subject{}
		if scrubbed[i].Format == FormatWriter {
			scrubbed[i].Agent, scrubbed[i].SessionID = "", ""
		}
	}
	if b := walk(scrubbed, 0, nil); b != nil {
		t.Fatalf("the chain after the erasure's scrub: %v", b)
	}
	for _, tc := range []struct {
		name   string
		rows   []Row
		change func(*Row)
		at     int
	}{
		{"a writer row's agent changed", kept, func(r *Row) { r.Agent = "mallory-bot" }, 2},
		{"a writer row's session changed", kept, func(r *Row) { r.SessionID = "s-10" }, 3},
		{"a writer row's agent restored after the scrub", scrubbed, func(r *Row) { r.Agent = "mallory-bot" }, 2},
		{"a writer row's agent blanked alone", kept, func(r *Row) { r.Agent = "" }, 3},
		{"a version 1 row's agent scrubbed", kept, func(r *Row) { r.Agent = "" }, 1},
		{"a version 1 row moved to the writer format", kept, func(r *Row) { r.Format = FormatWriter }, 0},
		{"the erasure row given an agent", kept, func(r *Row) { r.Agent = "mallory-bot" }, 4},
	} {
		changed := append([]Row(nil), tc.rows...)
		tc.change(&changed[tc.at])
		if b := walk(changed, 0, nil); b == nil || b.Seq != changed[tc.at].Seq {
			t.Errorf("%s: %v, want a break at seq %d", tc.name, b, changed[tc.at].Seq)
		}
	}
}
