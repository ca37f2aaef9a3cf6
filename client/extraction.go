package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Message is one message of a conversation memory.set_from_messages reads.
type Message struct {
	Role    string     `json:"role"` // user, assistant, system or tool
	Content string     `json:"content"`
	At      *time.Time `json:"at,omitempty"`      // when it was said: the facts it states are valid from then
	Speaker string     `json:"speaker,omitempty"` // who said it, kept with the turn
}

// FromMessagesRequest is the body of memory.set_from_messages.
type FromMessagesRequest struct {
	Messages []Message `json:"messages"`
	Identity
	MemoryType   string   `json:"memory_type,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	SessionKind  string   `json:"session_kind,omitempty"`  // chat (default) or coding
	RecalledKeys []string `json:"recalled_keys,omitempty"` // memories the session was served
	SessionKeys  []string `json:"session_keys,omitempty"`  // memories the session's own calls read
	Steps        []string `json:"steps,omitempty"`         // the pipeline in order; empty: every step
	Skip         []string `json:"skip,omitempty"`
	DryRun       bool     `json:"dry_run,omitempty"`
	// Defer commits the request for the extraction workers and answers its QueueID at
	// once; nil lets the server decide (LOOM_EXTRACTION_DEFER_AGENTS).
	Defer *bool `json:"defer,omitempty"`
}

// ExtractedFact is one fact extraction found and what became of it: Verdict is the
// write's (new, duplicate, conflict, refines, restatement, merge), a skip of the bulk
// write's (skipped_pinned, skipped_locked, skipped_unchanged, blacklisted), dropped
// (DroppedBy names the step) or not_written.
type ExtractedFact struct {
	Key          string   `json:"key"`
	Value        string   `json:"value"`
	MessageIndex int      `json:"message_index"`
	Verdict      string   `json:"verdict"`
	Revised      bool     `json:"revised,omitempty"`
	MemoryID     string   `json:"memory_id,omitempty"`
	VersionText  string   `json:"version_text,omitempty"`
	Status       string   `json:"status,omitempty"`
	MergedInto   string   `json:"merged_into,omitempty"`
	DuplicateOf  string   `json:"duplicate_of,omitempty"`
	ConflictWith []string `json:"conflict_with,omitempty"`
	DroppedBy    string   `json:"dropped_by,omitempty"`
	Reason       string   `json:"reason,omitempty"`
	About        string   `json:"about,omitempty"`       // "agent": a rule about the agent itself, filed as a learning (Verdict "learning")
	LearningID   string   `json:"learning_id,omitempty"` // the learnings queue's candidate it was filed as
}

// ForgottenRow is a stored memory the conversation asked to forget.
type ForgottenRow struct {
	Key          string `json:"key"`
	MessageIndex int    `json:"message_index"`
	MemoryID     string `json:"memory_id,omitempty"`
	Identity
	Retired bool   `json:"retired"`
	Skipped string `json:"skipped,omitempty"`
}

// PipelineStep is what one step of the pipeline did.
type PipelineStep struct {
	Name       string  `json:"name"`
	Facts      int     `json:"facts"`
	Dropped    int     `json:"dropped,omitempty"`
	ModelCalls int     `json:"model_calls,omitempty"`
	Ms         float64 `json:"ms"`
}

// ModelUsage is what a request's model calls consumed.
type ModelUsage struct {
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// FromMessagesAnswer is memory.set_from_messages' answer; a deferred request's holds
// its QueueID and status pending only.
type FromMessagesAnswer struct {
	Replay
	Namespace string `json:"namespace"`
	Identity
	Deferred   bool            `json:"deferred,omitempty"`
	QueueID    string          `json:"queue_id,omitempty"`
	Status     string          `json:"status,omitempty"`
	Facts      []ExtractedFact `json:"facts"`
	Forgotten  []ForgottenRow  `json:"forgotten"`
	Superseded []string        `json:"superseded"`
	Steps      []PipelineStep  `json:"steps"`
	ModelCalls int             `json:"model_calls"`
	ModelMs    float64         `json:"model_ms"`
	Usage      ModelUsage      `json:"usage"`
	DryRun     bool            `json:"dry_run,omitempty"`
	// TurnIDs are the transcript's turns as kept in the conversation's record, in
	// message order (Recall finds them).
	TurnIDs []string `json:"turn_ids,omitempty"`
}

// FromMessages extracts a conversation's durable facts and writes them, each judged as
// any write (memory.set_from_messages: POST /v1/namespaces/{ns}/memories:fromMessages).
func (c *Client) FromMessages(ctx context.Context, ns string, req FromMessagesRequest, opts ...CallOption) (*FromMessagesAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/memories:fromMessages", opts)
	k.body = req
	var a FromMessagesAnswer
	return &a, c.write(ctx, k, &a)
}

// ImportItem is one text memory.import writes.
type ImportItem struct {
	Text        string     `json:"text"`
	ValidAt     *time.Time `json:"valid_at,omitempty"`
	MemoryType  string     `json:"memory_type,omitempty"`
	Tags        []string   `json:"tags,omitempty"`
	Sensitivity string     `json:"sensitivity,omitempty"`
}

// ImportRequest is the body of memory.import.
type ImportRequest struct {
	Items []ImportItem `json:"items"`
	Identity
	DryRun bool `json:"dry_run,omitempty"`
}

// ImportOutcome is what memory.import made of one item: written, revised, unchanged,
// sensitivity_kept, left, repeated, merged, or a skip of the bulk write's.
type ImportOutcome struct {
	Index       int    `json:"index"`
	Key         string `json:"key"` // import: and 24 hex digits of the text's SHA-256
	Outcome     string `json:"outcome"`
	Verdict     string `json:"verdict,omitempty"`
	MemoryID    string `json:"memory_id,omitempty"`
	VersionText string `json:"version_text,omitempty"`
	Status      string `json:"status,omitempty"`
	MergedInto  string `json:"merged_into,omitempty"`
}

// ImportAnswer is memory.import's answer, its items in request order.
type ImportAnswer struct {
	Replay
	Items  []ImportOutcome `json:"items"`
	Counts map[string]int  `json:"counts"`
	DryRun bool            `json:"dry_run,omitempty"`
}

// Import writes texts under keys that digest them, through memory.bulk_set's path
// (memory.import: POST /v1/namespaces/{ns}/memories:import).
func (c *Client) Import(ctx context.Context, ns string, req ImportRequest, opts ...CallOption) (*ImportAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/memories:import", opts)
	k.body = req
	var a ImportAnswer
	return &a, c.write(ctx, k, &a)
}

// Extraction is a deferred memory.set_from_messages as the authority holds it.
type Extraction struct {
	QueueID       string          `json:"queue_id"`
	Namespace     string          `json:"namespace"`
	Agent         string          `json:"agent"`
	UserID        string          `json:"user_id"`
	SessionID     string          `json:"session_id"`
	Status        string          `json:"status"` // pending, running, held, done, failed
	Attempts      int             `json:"attempts"`
	Messages      int             `json:"messages"`
	LastError     string          `json:"last_error,omitempty"`
	NextAttemptAt *time.Time      `json:"next_attempt_at,omitempty"`
	LeaseUntil    *time.Time      `json:"lease_until,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	FinishedAt    *time.Time      `json:"finished_at,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"` // a done request's FromMessagesAnswer, stored just after the commit that marks it done
}

// ExtractionList is what the status reads answer, newest first.
type ExtractionList struct {
	Requests []Extraction `json:"requests"`
}

// ExtractionOptions narrow a status read.
type ExtractionOptions struct {
	Status string // pending, running, held, done or failed; "" any
	Limit  int    // 0: the server's 100
}

func (o ExtractionOptions) query() url.Values {
	q := url.Values{}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

// ExtractionStatus lists a namespace's deferred extractions (memory.extraction_status;
// admin token).
func (c *Client) ExtractionStatus(ctx context.Context, ns string, o ExtractionOptions) (*ExtractionList, error) {
	k := c.newCall(http.MethodGet, nsPath(ns)+"/extractions", nil)
	k.query = o.query()
	var a ExtractionList
	return &a, c.into(ctx, k, &a)
}

// MyExtraction reads one of the caller's own deferred extractions by queue_id
// (memory.extraction_status_mine).
func (c *Client) MyExtraction(ctx context.Context, queueID string) (*Extraction, error) {
	k := c.newCall(http.MethodGet, "/v1/extractions/"+url.PathEscape(queueID), nil)
	var a ExtractionList
	if err := c.into(ctx, k, &a); err != nil {
		return nil, err
	}
	return &a.Requests[0], nil
}

// MyExtractions lists the caller's own deferred extractions, newest first.
func (c *Client) MyExtractions(ctx context.Context, o ExtractionOptions) (*ExtractionList, error) {
	k := c.newCall(http.MethodGet, "/v1/extractions", nil)
	k.query = o.query()
	var a ExtractionList
	return &a, c.into(ctx, k, &a)
}

// RetryAnswer is what memory.extraction_retry_mine accepted.
type RetryAnswer struct {
	Accepted []string `json:"accepted"`
	Ignored  []string `json:"ignored"`
}

// RetryMyExtractions gives the caller's own failed extractions one more attempt
// (memory.extraction_retry_mine).
func (c *Client) RetryMyExtractions(ctx context.Context, queueIDs []string) (*RetryAnswer, error) {
	k := c.newCall(http.MethodPost, "/v1/extractions:retry", nil)
	k.body = map[string]any{"queue_ids": queueIDs}
	var a RetryAnswer
	return &a, c.into(ctx, k, &a)
}
