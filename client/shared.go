package client

import (
	"context"
	"net/http"
	"time"
)

// Shared scope, decisions and the namespace tools (docs/architecture.md, "Shared
// scope, decisions and namespace tools").

// Provenance is where a promoted (shared-scope) row came from and who promoted it.
type Provenance struct {
	PromotedBy      string    `json:"promoted_by"`
	PromotedAt      time.Time `json:"promoted_at"`
	Op              string    `json:"op"`
	SourceNamespace string    `json:"source_namespace"`
	SourceAgent     string    `json:"source_agent"`
	SourceUserID    string    `json:"source_user_id"`
	SourceSessionID string    `json:"source_session_id"`
	SourceKey       string    `json:"source_key"`
	SourceMemoryID  string    `json:"source_memory_id"`
	SourceVersion   int64     `json:"source_version"`
}

// SharedUser is the user of a promoted row: (namespace, "-", SharedUser, "-", key).
const SharedUser = "_shared"

// SharedAnswer is a key's shared row after a promote, cross_promote or demote.
type SharedAnswer struct {
	Replay
	Written     bool        `json:"written"`
	MemoryID    string      `json:"memory_id"`
	Namespace   string      `json:"namespace"`
	MemoryKey   string      `json:"memory_key"`
	UserID      string      `json:"user_id"`
	Version     int64       `json:"version"`
	VersionText string      `json:"version_text"`
	Seq         int64       `json:"seq"`
	Status      string      `json:"status"`
	Tombstone   bool        `json:"tombstone"`
	Shared      *Provenance `json:"shared,omitempty"`
}

// Promote copies the identity's live memory under key to the namespace's shared scope,
// found by every user's search (memory.promote).
func (c *Client) Promote(ctx context.Context, ns, key string, id Identity, opts ...CallOption) (*SharedAnswer, error) {
	k := c.newCall(http.MethodPost, keyPath(ns, key)+":promote", opts)
	k.body = id
	var a SharedAnswer
	return &a, c.write(ctx, k, &a)
}

// CrossPromote promotes it into target's shared scope (memory.cross_promote); id names
// the source (UserID SharedUser for ns's own shared row).
func (c *Client) CrossPromote(ctx context.Context, ns, key string, id Identity, target string, opts ...CallOption) (*SharedAnswer, error) {
	k := c.newCall(http.MethodPost, keyPath(ns, key)+":cross_promote", opts)
	k.body = struct {
		Identity
		TargetNamespace string `json:"target_namespace"`
	}{id, target}
	var a SharedAnswer
	return &a, c.write(ctx, k, &a)
}

// Demote takes the key's shared row out of the namespace (memory.demote).
func (c *Client) Demote(ctx context.Context, ns, key string, opts ...CallOption) (*SharedAnswer, error) {
	k := c.newCall(http.MethodPost, keyPath(ns, key)+":demote", opts)
	var a SharedAnswer
	return &a, c.write(ctx, k, &a)
}

// MoveRequest names a copy's or a move's source identity and its target; each target
// field defaults to the source's.
type MoveRequest struct {
	Identity
	TargetNamespace string `json:"target_namespace,omitempty"`
	TargetKey       string `json:"target_key,omitempty"`
	TargetAgent     string `json:"target_agent,omitempty"`
	TargetUserID    string `json:"target_user_id,omitempty"`
	TargetSessionID string `json:"target_session_id,omitempty"`
}

// MoveAnswer is the copy memory.copy or memory.move wrote.
type MoveAnswer struct {
	Replay
	Written        bool   `json:"written"`
	MemoryID       string `json:"memory_id"`
	Namespace      string `json:"namespace"`
	MemoryKey      string `json:"memory_key"`
	Agent          string `json:"agent"`
	UserID         string `json:"user_id"`
	SessionID      string `json:"session_id"`
	Version        int64  `json:"version"`
	VersionText    string `json:"version_text"`
	Seq            int64  `json:"seq"`
	SourceMemoryID string `json:"source_memory_id"`
	Moved          bool   `json:"moved"`
}

// CopyMemory writes a live memory under another key, identity or namespace (memory.copy).
func (c *Client) CopyMemory(ctx context.Context, ns, key string, req MoveRequest, opts ...CallOption) (*MoveAnswer, error) {
	return c.move(ctx, ns, key, "copy", req, opts)
}

// MoveMemory copies it and deletes the source (memory.move).
func (c *Client) MoveMemory(ctx context.Context, ns, key string, req MoveRequest, opts ...CallOption) (*MoveAnswer, error) {
	return c.move(ctx, ns, key, "move", req, opts)
}

func (c *Client) move(ctx context.Context, ns, key, method string, req MoveRequest, opts []CallOption) (*MoveAnswer, error) {
	k := c.newCall(http.MethodPost, keyPath(ns, key)+":"+method, opts)
	k.body = req
	var a MoveAnswer
	return &a, c.write(ctx, k, &a)
}

// DecisionRequest is decision.record's body.
type DecisionRequest struct {
	Key        string   `json:"key"`
	Decision   string   `json:"decision"`
	Rationale  string   `json:"rationale,omitempty"`
	DecidedBy  string   `json:"decided_by"`
	Supersedes []string `json:"supersedes,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	Agent      string   `json:"agent,omitempty"`
	UserID     string   `json:"user_id,omitempty"`
	SessionID  string   `json:"session_id,omitempty"`
}

// DecisionRecord is a decision's record.
type DecisionRecord struct {
	DecidedBy  string     `json:"decided_by"`
	Supersedes []string   `json:"supersedes"`
	RecordedBy string     `json:"recorded_by"`
	MemoryID   string     `json:"memory_id,omitempty"`
	Version    int64      `json:"version,omitempty"`
	RecordedAt *time.Time `json:"recorded_at,omitempty"`
	RetiredAt  *time.Time `json:"retired_at,omitempty"`
}

// DecisionAnswer is what decision.record answers.
type DecisionAnswer struct {
	Replay
	MemoryID    string         `json:"memory_id"`
	MemoryKey   string         `json:"memory_key"`
	Version     int64          `json:"version"`
	VersionText string         `json:"version_text"`
	Seq         int64          `json:"seq"`
	Verdict     string         `json:"verdict"`
	Written     bool           `json:"written"`
	Record      DecisionRecord `json:"record"`
}

// RecordDecision writes a decision memory and its record (decision.record).
func (c *Client) RecordDecision(ctx context.Context, ns string, req DecisionRequest, opts ...CallOption) (*DecisionAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/decisions", opts)
	k.body = req
	var a DecisionAnswer
	return &a, c.write(ctx, k, &a)
}

// NamespaceDeleteAnswer is what namespace.delete answers.
type NamespaceDeleteAnswer struct {
	Namespace string    `json:"namespace"`
	Deleted   bool      `json:"deleted"`
	WasLive   bool      `json:"was_live"`
	DeletedAt time.Time `json:"deleted_at"`
}

// DeleteNamespace soft-deletes a namespace: it is neither read nor judged until
// Configure registers it again (namespace.delete).
func (c *Client) DeleteNamespace(ctx context.Context, ns string) (*NamespaceDeleteAnswer, error) {
	var a NamespaceDeleteAnswer
	return &a, c.into(ctx, c.newCall(http.MethodDelete, nsPath(ns), nil), &a)
}

// Inventory is a namespace's memories counted (namespace.inventory).
type Inventory struct {
	Namespace string           `json:"namespace"`
	Live      int64            `json:"live"`
	Deleted   int64            `json:"deleted"`
	Expired   int64            `json:"expired"`
	ByType    map[string]int64 `json:"by_type"`
	ByStatus  map[string]int64 `json:"by_status"`
	ByUser    map[string]int64 `json:"by_user"`
	ByTag     map[string]int64 `json:"by_tag"`
	TagSample int              `json:"tag_sample"`
}

// Inventory counts a namespace's memories (namespace.inventory).
func (c *Client) Inventory(ctx context.Context, ns string) (*Inventory, error) {
	var a Inventory
	return &a, c.into(ctx, c.newCall(http.MethodGet, nsPath(ns)+"/inventory", nil), &a)
}

// Inspection is one memory's internal state (memory.inspect).
type Inspection struct {
	Head     *Memory `json:"head"`
	Versions []struct {
		Version       int64     `json:"version"`
		VersionText   string    `json:"version_text"`
		Seq           int64     `json:"seq"`
		Status        string    `json:"status"`
		Tombstone     bool      `json:"tombstone"`
		Redacted      bool      `json:"redacted,omitempty"`
		ContentSHA256 string    `json:"content_sha256"`
		Actor         string    `json:"actor"`
		UpdatedAt     time.Time `json:"updated_at"`
	} `json:"versions"`
	Links struct {
		SupersededBy   string          `json:"superseded_by,omitempty"`
		DuplicateOf    string          `json:"duplicate_of,omitempty"`
		ConflictWith   []string        `json:"conflict_with"`
		Shared         *Provenance     `json:"shared,omitempty"`
		DecisionRecord *DecisionRecord `json:"decision_record,omitempty"`
	} `json:"links"`
	Embeddings *struct {
		Present bool  `json:"present"`
		Version int64 `json:"version"`
		Current bool  `json:"current"`
	} `json:"embeddings"`
	Index *struct {
		Held        bool  `json:"held"`
		Position    int64 `json:"position"`
		HeadApplied bool  `json:"head_applied"`
	} `json:"index"`
	Skipped []string `json:"skipped"`
}

// Inspect reads one memory's internal state (memory.inspect).
func (c *Client) Inspect(ctx context.Context, ns, key string, id Identity) (*Inspection, error) {
	k := c.newCall(http.MethodGet, keyPath(ns, key)+"/inspect", nil)
	k.query = id.query(nil)
	var a Inspection
	return &a, c.into(ctx, k, &a)
}
