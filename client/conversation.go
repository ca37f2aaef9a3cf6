package client

import (
	"context"
	"net/http"
	"time"
)

// ObservedTurn is one turn memory.observe keeps.
type ObservedTurn struct {
	Role    string     `json:"role"` // user, assistant, system or tool
	Content string     `json:"content"`
	Speaker string     `json:"speaker,omitempty"`
	At      *time.Time `json:"at,omitempty"` // when it was said; default now
}

// ObserveRequest is the body of memory.observe: turns of one conversation.
type ObserveRequest struct {
	Turns []ObservedTurn `json:"turns"`
	Identity
}

// KeptTurn is a turn as Loom kept it.
type KeptTurn struct {
	TurnID       string    `json:"turn_id"`
	Role         string    `json:"role"`
	MessageIndex int       `json:"message_index"`
	OccurredAt   time.Time `json:"occurred_at"`
}

// ObserveAnswer is memory.observe's answer.
type ObserveAnswer struct {
	Namespace string     `json:"namespace"`
	Agent     string     `json:"agent"`
	UserID    string     `json:"user_id"`
	SessionID string     `json:"session_id"`
	Seq       int64      `json:"seq"`
	Turns     []KeptTurn `json:"turns"`
}

// Observe is memory.observe (POST /v1/namespaces/{ns}/turns): it appends turns to the
// conversation's record, extracting nothing, so Recall finds them.
func (c *Client) Observe(ctx context.Context, ns string, req ObserveRequest, opts ...CallOption) (*ObserveAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/turns", opts)
	k.body = req
	var a ObserveAnswer
	return &a, c.into(ctx, k, &a)
}

// RecallRequest is the body of memory.recall: exactly one of Key (with the Identity
// the memory was written under), MemoryID and Query.
type RecallRequest struct {
	Key      string `json:"key,omitempty"`
	MemoryID string `json:"memory_id,omitempty"`
	Query    string `json:"query,omitempty"`
	Identity
	Window *int `json:"window,omitempty"` // turns either side of each hit (default 2, at most 20)
	TopK   *int `json:"top_k,omitempty"`  // a query's hits (default 5, at most 50)
}

// Turn is one turn of a conversation as Loom kept it.
type Turn struct {
	TurnID       string    `json:"turn_id"`
	SessionID    string    `json:"session_id"`
	Agent        string    `json:"agent"`
	UserID       string    `json:"user_id"`
	Role         string    `json:"role"`
	Speaker      string    `json:"speaker,omitempty"`
	MessageIndex int       `json:"message_index"`
	OccurredAt   time.Time `json:"occurred_at"`
	Text         string    `json:"text"`
}

// RecallHit is a recalled turn and its neighbour window (it included, oldest first).
type RecallHit struct {
	Turn
	Score  float64 `json:"score,omitempty"`
	Window []Turn  `json:"window"`
}

// RecallAnswer is memory.recall's answer.
type RecallAnswer struct {
	Namespace string      `json:"namespace"`
	MemoryID  string      `json:"memory_id,omitempty"`
	Key       string      `json:"key,omitempty"`
	Query     string      `json:"query,omitempty"`
	Hits      []RecallHit `json:"hits"`
}

// Recall is memory.recall (POST /v1/namespaces/{ns}/memories:recall): the turns a
// memory was drawn from, or the turns that answer a query, each with its neighbours.
func (c *Client) Recall(ctx context.Context, ns string, req RecallRequest) (*RecallAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/memories:recall", nil)
	k.body = req
	var a RecallAnswer
	return &a, c.into(ctx, k, &a)
}

// CrystallizeRequest is the body of observe.crystallize: the session whose observed
// turns become facts, and the extraction's options as FromMessages takes them.
type CrystallizeRequest struct {
	Identity
	MemoryType   string   `json:"memory_type,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	SessionKind  string   `json:"session_kind,omitempty"`
	RecalledKeys []string `json:"recalled_keys,omitempty"`
	Steps        []string `json:"steps,omitempty"`
	Skip         []string `json:"skip,omitempty"`
	DryRun       bool     `json:"dry_run,omitempty"`
}

// CrystallizeAnswer is FromMessages' answer over the turns read (TurnIDs), how many
// were read, and whether observed turns of the session are left for another call.
type CrystallizeAnswer struct {
	FromMessagesAnswer
	Crystallized int  `json:"crystallized"`
	More         bool `json:"more"`
}

// Crystallize turns a session's observed turns that no crystallization read yet into
// facts through the extraction pipeline, each fact linked to the turn it came from
// (observe.crystallize: POST /v1/namespaces/{ns}/turns:crystallize).
func (c *Client) Crystallize(ctx context.Context, ns string, req CrystallizeRequest, opts ...CallOption) (*CrystallizeAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/turns:crystallize", opts)
	k.body = req
	var a CrystallizeAnswer
	return &a, c.into(ctx, k, &a)
}
