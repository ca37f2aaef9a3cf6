package memrow

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/loomplane/loom/events"
)

// Status is what a row states: a fact (active, conflicted), or a row kept but not
// served. A tombstone is a flag, not a status: a deleted row keeps the status it had.
// On the topic (events.Revision) and on the wire it is the plain string.
type Status string

// Statuses a row can hold.
const (
	StatusActive     Status = "active"
	StatusProposed   Status = "proposed"
	StatusConflicted Status = "conflicted"
	StatusDuplicate  Status = "duplicate"
	StatusSuperseded Status = "superseded"
	StatusRejected   Status = "rejected"
)

// Sensitivity is a row's tier. A caller may raise a row's tier, never lower the
// detector's. On the topic and on the wire it is the plain string.
type Sensitivity string

// Sensitivity tiers.
const (
	SensitivityNormal Sensitivity = "normal"
	SensitivityHigh   Sensitivity = "high"
)

// Types with special rules.
var (
	// NonSearchableTypes get no search document and are never a peer.
	NonSearchableTypes = map[string]bool{"episodic": true, "profile": true}
	// KeyIdentifiedTypes are identified by their key: a close peer under another key
	// is a conflict, never the same fact.
	KeyIdentifiedTypes = map[string]bool{"decision": true}
	// HiddenTypes are searchable only by a search that asks for them by memory_type
	// (the reflection_distill pass's reflections: "hidden from unfiltered recall").
	HiddenTypes = map[string]bool{"reflection": true}
)

// Identity names one key: a memory is identified by its namespace, its writer's
// identity tuple and its key, within an org.
type Identity struct {
	Org       string `json:"org"`
	Namespace string `json:"namespace"`
	Agent     string `json:"agent"`
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
	MemoryKey string `json:"memory_key"`
}

// Row is the complete memory row: what loom.memory_current holds as JSON, what a
// revision's payload is, and what a point read answers.
type Row struct {
	Identity
	MemoryID           string          `json:"memory_id"`
	Version            int64           `json:"version"`
	Seq                int64           `json:"seq"`
	MemoryType         string          `json:"memory_type"`
	Status             Status          `json:"status"`
	Tombstone          bool            `json:"tombstone"`
	Value              json.RawMessage `json:"value"`
	ContentSHA256      string          `json:"content_sha256"`
	Tags               []string        `json:"tags"`
	Entities           []string        `json:"entities"`
	Confidence         float64         `json:"confidence"`
	ReinforcementCount int             `json:"reinforcement_count"`
	RecallCount        int             `json:"recall_count,omitempty"` // times search served the memory, folded by workers/usage_fold.go
	// EvidenceCount is how many evidence events the memory's statement drew: a
	// restatement of it, a write merged into it, a duplicate of it; folded by
	// workers/usage_fold.go.
	EvidenceCount  int         `json:"evidence_count,omitempty"`
	Actor          string      `json:"actor"`
	SourceClass    string      `json:"source_class"`
	EmbeddingModel string      `json:"embedding_model"`
	EmbeddingDim   int         `json:"embedding_dim"`
	Pinned         bool        `json:"pinned"`
	Locked         bool        `json:"locked"`
	Sensitivity    Sensitivity `json:"sensitivity"`
	ValidAt        *time.Time  `json:"valid_at,omitempty"`
	ValidTo        *time.Time  `json:"valid_to,omitempty"`
	ExpiresAt      *time.Time  `json:"expires_at,omitempty"`
	OnExpire       string      `json:"on_expire,omitempty"`
	SupersededBy   string      `json:"superseded_by,omitempty"`
	DuplicateOf    string      `json:"duplicate_of,omitempty"`
	ConflictWith   []string    `json:"conflict_with,omitempty"`
	VerifiedBy     string      `json:"verified_by,omitempty"`
	VerifiedAt     *time.Time  `json:"verified_at,omitempty"`
	// JudgementOwed marks a row the conflict resolver should judge later (a key
	// another session of the same subject holds, under a policy that does not retire).
	JudgementOwed bool `json:"judgement_owed,omitempty"`
	// Redacted marks a row memory.redact scrubbed: its value, tags and entities are
	// gone, its content hash stays.
	Redacted bool `json:"redacted,omitempty"`
	// Shared is a promoted row's provenance (memory.promote, memory.cross_promote).
	Shared    *Provenance `json:"shared,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`

	// EntityTypes and Relations are what the writer declared for the graph beside
	// Entities; they describe the value, and a copy of the row carries them with it.
	EntityTypes map[string]string `json:"entity_types,omitempty"`
	Relations   []events.Relation `json:"relations,omitempty"`
}

// Live reports whether the row exists for readers: not deleted and not expired.
func (r *Row) Live(now time.Time) bool {
	return !r.Tombstone && !r.Expired(now)
}

// Expired reports whether the row's expiry or validity has passed: reads hide it at
// once, before any sweep acts on it.
func (r *Row) Expired(now time.Time) bool {
	if r.ExpiresAt != nil && !now.Before(*r.ExpiresAt) {
		return true
	}
	return r.ValidTo != nil && !now.Before(*r.ValidTo)
}

// Embedded reports whether the row has a search document: never for a high row or a
// non-searchable type, which therefore are never a search hit or a peer.
func (r *Row) Embedded() bool {
	return r.Sensitivity != SensitivityHigh && !NonSearchableTypes[r.MemoryType]
}

// Served reports whether search serves the row: live, embedded and of a status that
// states a fact (a conflicted row is served with its flag).
func (r *Row) Served(now time.Time) bool {
	return r.Live(now) && r.Embedded() && (r.Status == StatusActive || r.Status == StatusConflicted)
}

// Established reports whether the row is an accepted fact a proposal must not replace.
func (r *Row) Established(now time.Time) bool {
	return r.Live(now) && (r.Status == StatusActive || r.Status == StatusConflicted)
}

// VersionText is the version as a decimal string, exact for a JavaScript caller.
func VersionText(v int64) string { return strconv.FormatInt(v, 10) }

// NextVersion draws a version: wall-clock nanoseconds, strictly above the head's,
// so a head written on a host whose clock runs ahead is never overtaken.
func NextVersion(now time.Time, head int64) int64 {
	v := now.UnixNano()
	if v <= head {
		v = head + 1
	}
	return v
}
