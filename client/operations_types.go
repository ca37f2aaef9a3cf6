package client

import (
	"encoding/json"
	"time"
)

// SnapshotHeader is a snapshot's first line.
type SnapshotHeader struct {
	Kind       string          `json:"kind"` // snapshot
	Format     string          `json:"format"`
	SnapshotID string          `json:"snapshot_id"`
	Org        string          `json:"org"`
	Namespace  string          `json:"namespace"`
	Generation int64           `json:"generation"`
	TakenAt    time.Time       `json:"taken_at"`
	Config     json.RawMessage `json:"config,omitempty"`
	Blacklist  []string        `json:"blacklist"`
}

// SnapshotMemory is one memory line of a snapshot.
type SnapshotMemory struct {
	Kind string `json:"kind"` // memory
	Row  Row    `json:"row"`
}

// End is the last line of a snapshot or an export.
type End struct {
	Kind    string `json:"kind"`              // end
	Rows    int64  `json:"rows"`              // the memory lines
	Records int64  `json:"records,omitempty"` // the turn and digest lines
	SHA256  string `json:"sha256"`
}

// Row is a memory row as a snapshot or an export carries it: every field of it.
type Row struct {
	Org                string            `json:"org"`
	Namespace          string            `json:"namespace"`
	Agent              string            `json:"agent"`
	UserID             string            `json:"user_id"`
	SessionID          string            `json:"session_id"`
	MemoryKey          string            `json:"memory_key"`
	MemoryID           string            `json:"memory_id"`
	Version            int64             `json:"version"`
	Seq                int64             `json:"seq"`
	MemoryType         string            `json:"memory_type"`
	Status             string            `json:"status"`
	Tombstone          bool              `json:"tombstone"`
	Value              json.RawMessage   `json:"value"`
	ContentSHA256      string            `json:"content_sha256"`
	Tags               []string          `json:"tags"`
	Entities           []string          `json:"entities"`
	Confidence         float64           `json:"confidence"`
	ReinforcementCount int               `json:"reinforcement_count"`
	Actor              string            `json:"actor"`
	SourceClass        string            `json:"source_class"`
	EmbeddingModel     string            `json:"embedding_model"`
	EmbeddingDim       int               `json:"embedding_dim"`
	Pinned             bool              `json:"pinned"`
	Locked             bool              `json:"locked"`
	Sensitivity        string            `json:"sensitivity"`
	ValidAt            *time.Time        `json:"valid_at,omitempty"`
	ValidTo            *time.Time        `json:"valid_to,omitempty"`
	ExpiresAt          *time.Time        `json:"expires_at,omitempty"`
	OnExpire           string            `json:"on_expire,omitempty"`
	SupersededBy       string            `json:"superseded_by,omitempty"`
	DuplicateOf        string            `json:"duplicate_of,omitempty"`
	ConflictWith       []string          `json:"conflict_with,omitempty"`
	VerifiedBy         string            `json:"verified_by,omitempty"`
	VerifiedAt         *time.Time        `json:"verified_at,omitempty"`
	JudgementOwed      bool              `json:"judgement_owed,omitempty"`
	Redacted           bool              `json:"redacted,omitempty"`
	CreatedAt          time.Time         `json:"created_at"`
	UpdatedAt          time.Time         `json:"updated_at"`
	EntityTypes        map[string]string `json:"entity_types,omitempty"`
	Relations          []Relation        `json:"relations,omitempty"`
}

// ExportHeader is an export's first line.
type ExportHeader struct {
	Kind        string    `json:"kind"` // export
	ExportID    string    `json:"export_id"`
	Org         string    `json:"org"`
	UserID      string    `json:"user_id"`
	GeneratedAt time.Time `json:"generated_at"`
	Namespaces  []string  `json:"namespaces"` // null: every namespace of the org
}

// ExportMemory is one memory of an export: its key and every version, oldest first;
// the last is its current state.
type ExportMemory struct {
	Kind      string          `json:"kind"` // memory
	Namespace string          `json:"namespace"`
	MemoryKey string          `json:"memory_key"`
	Agent     string          `json:"agent"`
	UserID    string          `json:"user_id"`
	SessionID string          `json:"session_id"`
	Versions  []ExportVersion `json:"versions"`
}

// ExportVersion is one committed revision of an exported memory.
type ExportVersion struct {
	Seq         int64     `json:"seq"`
	Event       string    `json:"event"`
	Op          string    `json:"op"`
	CommittedAt time.Time `json:"committed_at"`
	Row         *Row      `json:"row"`
}

// ExportTurn is one kept conversation turn of the user in an export (after the
// memories), its text opened, with the memories drawn from it.
type ExportTurn struct {
	Kind         string    `json:"kind"` // turn
	Namespace    string    `json:"namespace"`
	TurnID       string    `json:"turn_id"`
	Agent        string    `json:"agent"`
	UserID       string    `json:"user_id"`
	SessionID    string    `json:"session_id"`
	Role         string    `json:"role"`
	Speaker      string    `json:"speaker,omitempty"`
	MessageIndex int       `json:"message_index"`
	OccurredAt   time.Time `json:"occurred_at"`
	Source       string    `json:"source"`
	Text         string    `json:"text"`
	MemoryIDs    []string  `json:"memory_ids,omitempty"`
}

// ExportLearning is one rule about the agent the user supports, in an export (after
// the digests): the learnings queue's candidate with the user's quotes alone.
type ExportLearning struct {
	Kind      string `json:"kind"` // learning
	Namespace string `json:"namespace"`
	Learning
}

// ExportDigest is one session digest of the user in an export (after the turns).
type ExportDigest struct {
	Kind      string    `json:"kind"` // digest
	Namespace string    `json:"namespace"`
	UserID    string    `json:"user_id"`
	SessionID string    `json:"session_id"`
	WindowEnd int       `json:"window_end"`
	Turns     int       `json:"turns"`
	Model     string    `json:"model"`
	CreatedAt time.Time `json:"created_at"`
	Text      string    `json:"text"`
}

// RestoreAnswer is what namespace.restore answers.
type RestoreAnswer struct {
	SnapshotID       string `json:"snapshot_id"`
	Source           string `json:"source"`
	Namespace        string `json:"namespace"`
	NamespaceCreated bool   `json:"namespace_created"`
	Replayed         bool   `json:"replayed"`
	Counts           struct {
		Rows               int64 `json:"rows"`
		Restored           int64 `json:"restored"`
		Unchanged          int64 `json:"unchanged"`
		ErasedSkipped      int64 `json:"erased_skipped"`
		LockedSkipped      int64 `json:"locked_skipped"`
		BlacklistedSkipped int64 `json:"blacklisted_skipped"`
		// The conversation's record: kept turns written, held already, left out for an
		// erasure since; session digests written.
		Turns              int64 `json:"turns"`
		TurnsUnchanged     int64 `json:"turns_unchanged"`
		TurnsErasedSkipped int64 `json:"turns_erased_skipped"`
		Digests            int64 `json:"digests"`
		// Learnings: candidates of the learnings queue filed again.
		Learnings int64 `json:"learnings"`
	} `json:"counts"`
	Batches int `json:"batches"`
}

// RollbackRequest is namespace.rollback's body. DryRun nil is a dry run.
type RollbackRequest struct {
	AsOf   time.Time `json:"as_of"`
	DryRun *bool     `json:"dry_run,omitempty"`
}

// RollbackAnswer is the rollback's plan, and what it wrote.
type RollbackAnswer struct {
	Namespace string    `json:"namespace"`
	AsOf      time.Time `json:"as_of"`
	DryRun    bool      `json:"dry_run"`
	Counts    struct {
		Keys        int64 `json:"keys"`
		Reinstated  int64 `json:"reinstated"`
		Tombstoned  int64 `json:"tombstoned"`
		Refused     int64 `json:"refused"`
		Unavailable int64 `json:"unavailable"`
	} `json:"counts"`
	Changes          []RollbackChange `json:"changes"`
	ChangesTruncated bool             `json:"changes_truncated,omitempty"`
	Refused          []RollbackChange `json:"refused"`
	Batches          int              `json:"batches"`
}

// RollbackChange is one key a rollback changes (or refuses to: Code).
type RollbackChange struct {
	MemoryKey         string `json:"memory_key"`
	Agent             string `json:"agent"`
	UserID            string `json:"user_id"`
	SessionID         string `json:"session_id"`
	Action            string `json:"action"` // reinstate or tombstone
	Event             string `json:"event"`
	FromVersion       int64  `json:"from_version"`
	ReinstatedVersion int64  `json:"reinstated_version,omitempty"`
	Version           int64  `json:"version,omitempty"`
	Code              Code   `json:"code,omitempty"`
}

// BulkGetKey names one key of a memory.bulk_get.
type BulkGetKey struct {
	MemoryKey string `json:"memory_key"`
	Identity
}

// BulkGetRequest asks for keys, memory ids, or both (1000 in all at most).
type BulkGetRequest struct {
	Keys []BulkGetKey `json:"keys,omitempty"`
	IDs  []string     `json:"ids,omitempty"`
}

// BulkGetAnswer holds the live memories asked for, and what was not found.
type BulkGetAnswer struct {
	Memories []Memory `json:"memories"`
	Missing  struct {
		Keys []BulkGetKey `json:"keys"`
		IDs  []string     `json:"ids"`
	} `json:"missing"`
}

// SweepReport is what a blacklist sweep did.
type SweepReport struct {
	Patterns          []string `json:"patterns"`
	Matched           int64    `json:"matched"`
	Tombstoned        int64    `json:"tombstoned"`
	Batches           int      `json:"batches"`
	ProjectionPending bool     `json:"projection_pending,omitempty"`
	Error             string   `json:"error,omitempty"`
}

// TokenRequest describes a token to create; Namespaces nil reaches every namespace.
type TokenRequest struct {
	Role       string   `json:"role"`
	Name       string   `json:"name,omitempty"`
	Namespaces []string `json:"namespaces,omitempty"`
	ReadUserID string   `json:"read_user_id,omitempty"`
	// ReadSessionID binds the token to one session (the own_session scope).
	ReadSessionID string     `json:"read_session_id,omitempty"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	TTLSeconds    int64      `json:"ttl_seconds,omitempty"`
}

// TokenInfo is a token, never its secret.
type TokenInfo struct {
	TokenID    string   `json:"token_id"`
	Org        string   `json:"org"`
	Role       string   `json:"role"`
	Name       string   `json:"name"`
	Namespaces []string `json:"namespaces"`
	ReadUserID string   `json:"read_user_id,omitempty"`
	// ReadSessionID is the one session an own_session token reaches.
	ReadSessionID string     `json:"read_session_id,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	ReplacedBy    string     `json:"replaced_by,omitempty"`
}

// CreatedToken is a new token and its secret.
type CreatedToken struct {
	Token string `json:"token"`
	TokenInfo
}

// TokenList is the org's tokens.
type TokenList struct {
	Tokens     []TokenInfo `json:"tokens"`
	CacheTTLMS int64       `json:"cache_ttl_ms"`
}
