package events

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// AuditNote is a write's own audit row (memory-architecture, "Audit rows"), carried by
// the last record of the commit it describes: a bulk write's batch row, naming the
// revisions it committed and counting its entries' verdicts, or the conflict
// resolver's decision over a pair. Each revision still has its own audit row; the note
// adds the row of the write as a whole. Hash-only: memory ids, seqs, counts and
// verdicts, never a key, a value or a user id. Added within v2 (additive).
//
// A note of kind AuditErasure is an erasure saga's transition (erasure.started, on
// the saga's memory.erased record; erasure.failed, erasure.recovered,
// erasure.completed and erasure.abandoned, each on a loom.audited record of its own),
// one in each namespace the saga fences: it names the saga, never its user.
type AuditNote struct {
	Kind  string `json:"kind"`  // AuditBatch, AuditDecision or AuditErasure
	Op    string `json:"op"`    // the write's op: memory.bulk_set, memory.import, memory.conflict_resolver…
	Actor string `json:"actor"` // the request's principal, or worker:<name>
	// FirstSeq and LastSeq bound the commit's revisions (this record's seq is LastSeq):
	// a commit's revisions take consecutive seqs.
	FirstSeq int64 `json:"first_seq"`
	LastSeq  int64 `json:"last_seq"`
	// Members are the memory ids of the revisions, in seq order, listed only up to
	// MaxNoteMembers. MemberCount and MembersSHA256 (SetMembers) name them whatever
	// their number: a larger batch's row references them by its seq range, each
	// revision's own audit row naming its memory id, and the digest binds the row to
	// them. So the note stays a few KiB whatever the batch, far under the broker's
	// message size. A note committed before the count carries Members alone.
	Members       []string `json:"members,omitempty"`
	MemberCount   int64    `json:"member_count,omitempty"`
	MembersSHA256 string   `json:"members_sha256,omitempty"`
	// Verdicts counts a batch's entries by what came of them (new, duplicate, merge,
	// skipped_unchanged, …); zero counts are left out.
	Verdicts map[string]int `json:"verdicts,omitempty"`
	// Pairs are a decision's judged pairs.
	Pairs []AuditPair `json:"pairs,omitempty"`
	// Erasure is an erasure note's saga.
	Erasure *AuditSaga `json:"erasure,omitempty"`
}

// AuditSaga is the erasure saga a note of kind AuditErasure names.
type AuditSaga struct {
	ID      string `json:"id"`             // the erasure request (GET /v1/erasures/{id})
	Status  string `json:"status"`         // the saga's status after the transition: running, completed or failed
	Attempt int    `json:"attempt"`        // the run it happened in (erasure_recovery's take-overs count up)
	Step    string `json:"step,omitempty"` // erasure.failed: the step that failed
}

// The ops of an erasure saga's audit rows (memory-architecture, "Erasure saga").
const (
	OpErasureStarted   = "erasure.started"
	OpErasureFailed    = "erasure.failed"
	OpErasureRecovered = "erasure.recovered"
	OpErasureCompleted = "erasure.completed"
	OpErasureAbandoned = "erasure.abandoned"
)

// AuditPair is one pair a conflict resolver's decision acted on.
type AuditPair struct {
	MemoryID   string  `json:"memory_id"` // the judged row
	PeerID     string  `json:"peer_id"`
	Action     string  `json:"action"`            // retire, flag, clear
	Verdict    string  `json:"verdict,omitempty"` // the judge's verdict; "" when the fold acted without one
	Confidence float64 `json:"confidence"`
	Cosine     float64 `json:"cosine"`
}

// MaxNoteMembers is the most memory ids a note lists (about 10 KiB of them): a
// 1,000-entry batch's list (some 40 KiB, beside the record's own value and vector)
// is left to its count, digest and seq range.
const MaxNoteMembers = 256

// SetMembers names the revisions' memory ids (in seq order) on the note: their
// count and digest, and the ids themselves up to MaxNoteMembers.
func (a *AuditNote) SetMembers(ids []string) {
	a.MemberCount, a.MembersSHA256, a.Members = int64(len(ids)), MembersDigest(ids), nil
	if len(ids) <= MaxNoteMembers {
		a.Members = ids
	}
}

// MembersDigest is the hex SHA-256 of memory ids, each followed by a newline.
func MembersDigest(ids []string) string {
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Kinds of audit note.
const (
	AuditBatch    = "batch"
	AuditDecision = "decision"
	AuditErasure  = "erasure"
)

func validateAudit(e *Envelope) error {
	a := e.Audit
	if a.Kind == AuditErasure || e.Type == TypeErased || e.Type == TypeAudited {
		return validateErasureNote(e)
	}
	switch {
	case !e.Type.IsRevision():
		return fmt.Errorf("type %q carries no audit note", e.Type)
	case a.Kind != AuditBatch && a.Kind != AuditDecision:
		return fmt.Errorf("audit: kind %q, want %q or %q", a.Kind, AuditBatch, AuditDecision)
	case a.Op == "" || a.Actor == "":
		return errors.New("audit: op and actor are required")
	case a.LastSeq != e.Seq || a.FirstSeq < 1 || a.FirstSeq > a.LastSeq:
		return fmt.Errorf("audit: seqs %d..%d, want a range ending at the record's seq %d", a.FirstSeq, a.LastSeq, e.Seq)
	case a.MemberCount == 0 && int64(len(a.Members)) != a.LastSeq-a.FirstSeq+1:
		return fmt.Errorf("audit: %d members for seqs %d..%d", len(a.Members), a.FirstSeq, a.LastSeq)
	case a.MemberCount != 0 && a.MemberCount != a.LastSeq-a.FirstSeq+1:
		return fmt.Errorf("audit: a count of %d members for seqs %d..%d", a.MemberCount, a.FirstSeq, a.LastSeq)
	case a.MemberCount != 0 && (len(a.MembersSHA256) != sha256.Size*2 || a.Members != nil && int64(len(a.Members)) != a.MemberCount):
		return fmt.Errorf("audit: %d members listed of %d, digest %q", len(a.Members), a.MemberCount, a.MembersSHA256)
	}
	return nil
}

// validateErasureNote checks an erasure saga's note: only on a memory.erased or a
// loom.audited record, naming its saga and actor at the record's seq alone.
func validateErasureNote(e *Envelope) error {
	a := e.Audit
	switch {
	case e.Type != TypeErased && e.Type != TypeAudited:
		return fmt.Errorf("type %q carries no erasure audit note", e.Type)
	case a.Kind != AuditErasure:
		return fmt.Errorf("audit: kind %q on a %q record, want %q", a.Kind, e.Type, AuditErasure)
	case !strings.HasPrefix(a.Op, "erasure.") || a.Actor == "":
		return fmt.Errorf("audit: an erasure note's op %q (want erasure.*) and actor %q", a.Op, a.Actor)
	case a.FirstSeq != e.Seq || a.LastSeq != e.Seq:
		return fmt.Errorf("audit: seqs %d..%d, want the record's seq %d", a.FirstSeq, a.LastSeq, e.Seq)
	case len(a.Members) > 0 || a.MemberCount != 0 || len(a.Pairs) > 0 || len(a.Verdicts) > 0:
		return errors.New("audit: an erasure note names no members, pairs or verdicts")
	case a.Erasure == nil || a.Erasure.ID == "" || a.Erasure.Status == "" || a.Erasure.Attempt < 1:
		return fmt.Errorf("audit: an erasure note needs its saga's id, status and attempt: %+v", a.Erasure)
	}
	return nil
}
