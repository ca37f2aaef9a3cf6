// Package events is Loom's topic contract: the Kafka record key, the JSON envelope of
// each record, its CloudEvents headers, and the sealing of memory content.
//
// Every committed revision of a namespace is exactly one record on DefaultTopic, keyed
// by RecordKey so that a namespace's records share a partition and arrive in seq order.
// Seq is the namespace generation, so a consumer tells a duplicate (seq already seen)
// from a gap (seq skipped). Identity, versions, hashes, status and timestamps are plain;
// memory text is sealed under a per-revision data key that Loom can destroy, so the log
// can be replayed for ever without bringing back redacted or erased text.
//
// The package depends on the standard library and, to decode records fast, on
// github.com/segmentio/encoding (a drop-in for encoding/json); it imports nothing else,
// so downstream consumers can import it.
package events

// DefaultTopic is the topic records are published to unless configured otherwise.
const DefaultTopic = "loom.memory.revisions.v1"

// EnvelopeVersion is the envelope version this package writes. Additive changes stay
// within a version. Version 2 took the user id and the content digest out of the plain
// fields (user_ref, a keyed digest, replaced them; both moved into the sealed content),
// so an erasure's key destruction leaves neither readable; the topic is kept, because
// it is the replay source, and Decode reads every version from MinEnvelopeVersion on.
// Version 3 did the same with the writer identity: the agent and the session id are
// sealed (a revision's Content, a turn's TurnText) and named in the clear by
// agent_ref and session_ref (AgentRef, SessionRef).
const EnvelopeVersion = 3

// MinEnvelopeVersion is the oldest envelope version Decode reads: records written
// before version 2 carry user_id and content_sha256 in the plain fields.
const MinEnvelopeVersion = 1

// ContentType is the media type of a record value.
const ContentType = "application/json"

// SealAlg names the sealing algorithm in Sealed.Alg.
const SealAlg = "A256GCM"

// CloudEventsSpecVersion is the CloudEvents version the headers follow.
const CloudEventsSpecVersion = "1.0"

// Type is the event type of a record, named after the transition it records.
type Type string

const (
	TypeWritten       Type = "memory.written"        // first revision of a key (or first after a tombstone)
	TypeRevised       Type = "memory.revised"        // a new value or restatement over a live head
	TypeTombstoned    Type = "memory.tombstoned"     // the key was deleted
	TypeRestored      Type = "memory.restored"       // a tombstoned key came back
	TypeRedacted      Type = "memory.redacted"       // content was scrubbed in place
	TypeStatusChanged Type = "memory.status_changed" // pin, lock, supersede, conflict, reject, verify
	TypeErased        Type = "memory.erased"         // an erasure's own generation
	TypeParked        Type = "loom.parked"           // placeholder for a record Kafka refused; keeps the stream gapless
	// TypeTurnsObserved records turns of a conversation kept as evidence (memory.observe,
	// and the inputs of memory.set_from_messages): no revision of any key; it takes its
	// seq so the namespace's stream stays gapless, and the projections pass over it.
	TypeTurnsObserved Type = "memory.turns_observed"
	// TypeAudited records an audit row of its own (an erasure saga's transition:
	// AuditNote of kind AuditErasure): no revision of any key; it takes its seq so the
	// row is chained in its namespace's audit trail in seq order, and the projections
	// pass over it but for that row.
	TypeAudited Type = "loom.audited"
)

// Valid reports whether t is one of the known event types.
func (t Type) Valid() bool {
	return t.IsRevision() || t.IsDocument() || t == TypeErased || t == TypeParked || t == TypeTurnsObserved || t == TypeAudited || t == TypeUsageRecorded
}

// IsRevision reports whether records of type t carry a memory revision.
func (t Type) IsRevision() bool {
	switch t {
	case TypeWritten, TypeRevised, TypeTombstoned, TypeRestored, TypeRedacted, TypeStatusChanged:
		return true
	}
	return false
}
