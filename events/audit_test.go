package events

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// noted is a revision record at seq n carrying a batch note over seqs 1..n.
func noted(t *testing.T, n int) (*Envelope, []string) {
	env := revisionEnvelope(t, TypeWritten, int64(n), false)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	note := &AuditNote{Kind: AuditBatch, Op: "memory.bulk_set", Actor: "token:ops", FirstSeq: 1, LastSeq: int64(n),
		Verdicts: map[string]int{"new": n}}
	note.SetMembers(ids)
	env.Audit = note
	return env, ids
}

// A batch's note lists its members up to MaxNoteMembers; past that it names them by
// count and digest, so a 1,000-entry batch's record carries a note of a few hundred
// bytes instead of some 40 KiB of ids. Both encode, decode and validate.
func TestABatchNoteListsItsMembersOnlyUpToTheLimit(t *testing.T) {
	for _, c := range []struct {
		n      int
		listed bool
	}{{1, true}, {MaxNoteMembers, true}, {MaxNoteMembers + 1, false}, {1000, false}} {
		t.Run(fmt.Sprint(c.n), func(t *testing.T) {
			env, ids := noted(t, c.n)
			a := env.Audit
			if (a.Members != nil) != c.listed || a.MemberCount != int64(c.n) || a.MembersSHA256 != MembersDigest(ids) {
				t.Fatalf("%d members: listed %d, count %d, digest %s", c.n, len(a.Members), a.MemberCount, a.MembersSHA256)
			}
			b, err := Encode(env)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if got.Audit.MemberCount != int64(c.n) || len(got.Audit.Members) != len(a.Members) {
				t.Fatalf("decoded %+v", got.Audit)
			}
			// The note's share of the record, at most MaxNoteMembers ids (about 10 KiB).
			bare := *env
			bare.Audit = nil
			plain, _ := Encode(&bare)
			if extra := len(b) - len(plain); extra > MaxNoteMembers*40+512 {
				t.Fatalf("the note adds %d bytes to the record", extra)
			}
		})
	}
}

// A note whose count, digest or listed members disagree with its seqs is refused; a
// note committed before the count (members alone) still reads.
func TestABatchNoteThatMiscountsIsRefused(t *testing.T) {
	for name, spoil := range map[string]func(*AuditNote){
		"count off the seqs":         func(a *AuditNote) { a.MemberCount-- },
		"no digest":                  func(a *AuditNote) { a.MembersSHA256 = "" },
		"a listed member missing":    func(a *AuditNote) { a.Members = a.Members[1:] },
		"neither count nor a member": func(a *AuditNote) { a.MemberCount, a.Members = 0, nil },
	} {
		env, _ := noted(t, 3)
		spoil(env.Audit)
		if _, err := Encode(env); err == nil || !strings.Contains(err.Error(), "audit") {
			t.Errorf("%s: encoded (%v)", name, err)
		}
	}
	env, ids := noted(t, 3)
	env.Audit.MemberCount, env.Audit.MembersSHA256, env.Audit.Members = 0, "", ids
	if _, err := Encode(env); err != nil {
		t.Fatalf("a note of members alone: %v", err)
	}
}

// erasureNote is an erasure saga's erasure.completed note at seq.
func erasureNote(seq int64) *AuditNote {
	return &AuditNote{Kind: AuditErasure, Op: OpErasureCompleted, Actor: "token:ops", FirstSeq: seq, LastSeq: seq,
		Erasure: &AuditSaga{ID: uuid.NewString(), Status: "completed", Attempt: 1}}
}

// audited is a loom.audited record at seq carrying an erasure note.
func audited(seq int64) *Envelope {
	return &Envelope{Version: EnvelopeVersion, ID: RecordID("acme", "support", seq), Type: TypeAudited, Org: "acme", Namespace: "support",
		Seq: seq, CommittedAt: committedAt, Audit: erasureNote(seq)}
}

// An erasure saga's note rides a memory.erased record (erasure.started) or a
// loom.audited record of its own, names its saga at the record's seq, and no other
// record carries one; a loom.audited record without a note is refused.
func TestAnErasureNoteRidesOnlyAnErasureOrAnAuditedRecord(t *testing.T) {
	erased := audited(7)
	erased.Type, erased.Audit.Op = TypeErased, OpErasureStarted
	erased.Erasure = &Erasure{ID: erased.Audit.Erasure.ID, Scope: ErasureScopeNamespace, Generation: 7}
	revision := revisionEnvelope(t, TypeWritten, 7, false)
	revision.Audit = audited(7).Audit
	for _, c := range []struct {
		name string
		env  func() *Envelope
		ok   bool
	}{
		{"on a loom.audited record", func() *Envelope { return audited(5) }, true},
		{"on a memory.erased record", func() *Envelope { return erased }, true},
		{"on a revision", func() *Envelope { return revision }, false},
		{"a loom.audited record without one", func() *Envelope { e := audited(5); e.Audit = nil; return e }, false},
		{"at another seq", func() *Envelope { e := audited(5); e.Audit.LastSeq = 4; return e }, false},
		{"without its saga", func() *Envelope { e := audited(5); e.Audit.Erasure = nil; return e }, false},
		{"with an op of another kind", func() *Envelope { e := audited(5); e.Audit.Op = "memory.bulk_set"; return e }, false},
		{"a batch note on a loom.audited record", func() *Envelope { e := audited(5); e.Audit.Kind = AuditBatch; return e }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := Encode(c.env())
			if (err == nil) != c.ok {
				t.Fatalf("encode: %v, want ok %v", err, c.ok)
			}
			if !c.ok {
				return
			}
			got, err := Decode(b)
			if err != nil || got.Audit == nil || got.Audit.Erasure == nil || got.Audit.Op != c.env().Audit.Op {
				t.Fatalf("decoded %+v %v", got, err)
			}
		})
	}
}
