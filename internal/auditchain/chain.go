// Package auditchain is the verifiable audit trail (memory-architecture, "Audit rows"):
// the hash each audit row of loom.audit_log carries, chained per (org, namespace) in
// seq order, the walk that finds the first broken link, and the checkpoints in
// Postgres (loom.audit_checkpoints) that a rewritten chain no longer meets.
//
// A row's hash covers the fields an erasure leaves: an erasure scrubs an audit row's
// key, content hash and user id in place, and a replay of the topic after it cannot
// open those at all, so they are outside the hash and a replay writes the same hashes.
// The hash covers instead a salted commitment to them that the erasure leaves
// (subject.go), which a walk checks the fields against while they are there. Rows of
// FormatWriter (written from records of envelope version 3 on) keep the writer
// identity, the agent and the session id, behind the commitment as well, so an erasure
// scrubs those too; rows of FormatV1 hash them in the clear, as they always did.
// The projector computes the hashes from the records, so the write path pays nothing.
package auditchain

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// The canonical encodings of a row. A row says which it is in (Row.Format, the
// chain_format column); a chain may hold rows of both, in seq order.
const (
	// FormatV1 hashes the agent and the session id in the clear (format "loom.audit.v1").
	FormatV1 = 1
	// FormatWriter hashes neither (format "loom.audit.v2"): the row's subject
	// commitment covers them (WriterSubjectCommitment), so an erasure can scrub them
	// and the chain still verifies. A row of it without a commitment holds neither.
	FormatWriter = 2
)

var formatNames = map[uint8]string{FormatV1: "loom.audit.v1", FormatWriter: "loom.audit.v2"}

// Erasure audit rows: the op and event type of the row a memory.erased record leaves,
// and its status, which says whether the scope's audit rows were deleted (a purge) or
// scrubbed.
const (
	OpErasure       = "erasure.request"
	EventErased     = "memory.erased"
	EventRedacted   = "memory.redacted" // a redaction's row: its memory's rows a replay writes blank lie below it
	StatusPurged    = "purged"
	StatusScrubbed  = "scrubbed"
	chainStartsHere = ""
)

// Row is an audit row's chained fields, and its hashes as stored.
type Row struct {
	Org, Namespace string
	Seq            uint64
	Op             string
	EventType      string
	OccurredAt     time.Time // stored to the second
	Actor          string
	Agent          string
	SessionID      string
	MemoryID       string
	Version        uint64
	SourceClass    string
	Status         string
	RequestID      string
	// SubjectCommitment commits to the scrubbable fields (subject.go); "" on a row
	// written before commitments, which hashes as it did.
	SubjectCommitment string
	// Subject is the scrubbable fields as stored: checked against the commitment by a
	// walk, never hashed.
	Subject Subject
	// Detail is a write's own row's account of itself (a bulk write's members and
	// verdict counts, a resolver's decision: events.AuditNote as JSON); "" on a
	// revision's row, which hashes as it did.
	Detail string
	// Format is the row's canonical encoding: FormatV1 (0 reads as it) or FormatWriter.
	Format uint8

	PrevHash string
	RowHash  string
}

// Hash is the row's hash after prev: SHA-256 over the format, prev and each chained
// field length-prefixed (so no two rows encode alike), in hex. A row of FormatWriter
// leaves out its agent and session id.
func Hash(prev string, r Row) string {
	writer := r.Format == FormatWriter
	format := formatNames[FormatV1]
	if writer {
		format = formatNames[FormatWriter]
	}
	h := sha256.New()
	var buf []byte
	put := func(s string) {
		buf = strconv.AppendInt(buf[:0], int64(len(s)), 10)
		buf = append(buf, ':')
		buf = append(buf, s...)
		buf = append(buf, ',')
		h.Write(buf)
	}
	put(format)
	put(prev)
	put(r.Org)
	put(r.Namespace)
	put(strconv.FormatUint(r.Seq, 10))
	put(r.Op)
	put(r.EventType)
	put(strconv.FormatInt(r.OccurredAt.UTC().Unix(), 10))
	put(r.Actor)
	if !writer {
		put(r.Agent)
		put(r.SessionID)
	}
	put(r.MemoryID)
	put(strconv.FormatUint(r.Version, 10))
	put(r.SourceClass)
	put(r.Status)
	put(r.RequestID)
	if r.SubjectCommitment != "" {
		put("subject")
		put(r.SubjectCommitment)
	}
	if r.Detail != "" {
		put("detail")
		put(r.Detail)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Link sets each row's PrevHash and RowHash, after prev, in the order given: the rows
// of one namespace in (seq, op) order. A seq holds one row, or two when its record
// carries a write's own row (events.AuditNote) beside its revision's.
func Link(prev string, rows []*Row) string {
	for _, r := range rows {
		r.PrevHash = prev
		r.RowHash = Hash(prev, *r)
		prev = r.RowHash
	}
	return prev
}

// CheckpointHash chains a checkpoint after the one before it.
func CheckpointHash(prev, org, namespace string, seq int64, rowHash string) string {
	return Hash(prev, Row{Org: org, Namespace: namespace, Seq: uint64(seq), Op: "audit.checkpoint", RequestID: rowHash})
}
