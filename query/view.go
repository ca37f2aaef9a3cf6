package query

import (
	"encoding/json"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/memrow"
)

// memoryView is how a memory row is answered.
type memoryView struct {
	MemoryID           string             `json:"memory_id"`
	Namespace          string             `json:"namespace"`
	MemoryKey          string             `json:"memory_key"`
	Agent              string             `json:"agent"`
	UserID             string             `json:"user_id"`
	SessionID          string             `json:"session_id"`
	Version            int64              `json:"version"`
	VersionText        string             `json:"version_text"`
	Seq                int64              `json:"seq"`
	MemoryType         string             `json:"memory_type"`
	Status             memrow.Status      `json:"status"`
	Value              json.RawMessage    `json:"value"`
	ContentSHA256      string             `json:"content_sha256"`
	Tags               []string           `json:"tags"`
	Confidence         float64            `json:"confidence"`
	ReinforcementCount int                `json:"reinforcement_count"`
	RecallCount        int                `json:"recall_count"`
	EvidenceCount      int                `json:"evidence_count"`
	Actor              string             `json:"actor"`
	SourceClass        string             `json:"source_class"`
	Pinned             bool               `json:"pinned"`
	Locked             bool               `json:"locked"`
	Sensitivity        memrow.Sensitivity `json:"sensitivity"`
	ValidAt            *time.Time         `json:"valid_at,omitempty"`
	ValidTo            *time.Time         `json:"valid_to,omitempty"`
	ExpiresAt          *time.Time         `json:"expires_at,omitempty"`
	OnExpire           string             `json:"on_expire,omitempty"`
	SupersededBy       string             `json:"superseded_by,omitempty"`
	DuplicateOf        string             `json:"duplicate_of,omitempty"`
	ConflictWith       []string           `json:"conflict_with,omitempty"`
	VerifiedBy         string             `json:"verified_by,omitempty"`
	VerifiedAt         *time.Time         `json:"verified_at,omitempty"`
	Redacted           bool               `json:"redacted,omitempty"`
	// Tombstone marks a deleted row: only a recovery listing serves one.
	Tombstone bool `json:"tombstone,omitempty"`
	// Shared is a promoted row's provenance: who promoted it, from which key and version.
	Shared    *memrow.Provenance `json:"shared,omitempty"`
	CreatedAt time.Time          `json:"created_at"`
	UpdatedAt time.Time          `json:"updated_at"`

	Entities    []string          `json:"entities"`
	EntityTypes map[string]string `json:"entity_types,omitempty"`
	Relations   []events.Relation `json:"relations,omitempty"`
}

func viewOf(r *memrow.Row) memoryView {
	tags, entities := r.Tags, r.Entities
	if tags == nil {
		tags = []string{}
	}
	if entities == nil {
		entities = []string{}
	}
	return memoryView{
		MemoryID: r.MemoryID, Namespace: r.Namespace, MemoryKey: r.MemoryKey, Agent: r.Agent, UserID: r.UserID,
		SessionID: r.SessionID, Version: r.Version, VersionText: memrow.VersionText(r.Version), Seq: r.Seq,
		MemoryType: r.MemoryType, Status: r.Status, Value: memrow.ServedValue(r.Value), ContentSHA256: r.ContentSHA256, Tags: tags,
		Confidence: r.Confidence, ReinforcementCount: r.ReinforcementCount, RecallCount: r.RecallCount, EvidenceCount: r.EvidenceCount, Actor: r.Actor, SourceClass: r.SourceClass,
		Pinned: r.Pinned, Locked: r.Locked, Sensitivity: r.Sensitivity, ValidAt: r.ValidAt, ValidTo: r.ValidTo,
		ExpiresAt: r.ExpiresAt, OnExpire: r.OnExpire, SupersededBy: r.SupersededBy, DuplicateOf: r.DuplicateOf, Redacted: r.Redacted, Tombstone: r.Tombstone,
		ConflictWith: r.ConflictWith, VerifiedBy: r.VerifiedBy, VerifiedAt: r.VerifiedAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Entities: entities, EntityTypes: r.EntityTypes, Relations: r.Relations, Shared: r.Shared,
	}
}

// inReadScope reports whether a token may see a row r. A promoted row
// (memrow.SharedUser) is in every user's and every session's read scope; a token
// bound to one session (own_session) otherwise sees that session's rows alone.
func inReadScope(p auth.Principal, r *memrow.Row) bool {
	return r.IsShared() || p.Sees(r.UserID, r.SessionID)
}
