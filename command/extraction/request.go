// Package extraction is memory.set_from_messages' pipeline: the named steps that
// extract the durable facts of a conversation with a model, narrow them, and write
// them through the write side's memory.bulk_set path (a Writer the write side gives
// it). The write side runs it inline for a request (command/extract.go); the
// extraction workers (workers/) run it for a deferred one. It imports no role: the
// write side hands it the writer, so every fact is judged as any write is.
package extraction

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// Op is the revisions' op of the facts it writes.
const Op = "memory.set_from_messages"

// Transcript roles.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
	roleSystem    = "system"
	roleTool      = "tool"
)

const (
	maxTranscriptMessages = 1000
	maxListedKeys         = 100 // recalled_keys, session_keys
)

// Message is one message of a conversation.
type Message struct {
	Role    string     `json:"role"`
	Content string     `json:"content"`
	At      *time.Time `json:"at,omitempty"` // when it was said: the facts it states are valid from then
	// Speaker names who said it (kept with the turn as evidence; the model is not shown it).
	Speaker string `json:"speaker,omitempty"`
}

// Request is the body of memory.set_from_messages; a deferred request is committed as
// it is and run as it is.
type Request struct {
	Messages  []Message `json:"messages"`
	Agent     string    `json:"agent,omitempty"`
	UserID    string    `json:"user_id,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
	// MemoryType and Tags apply to every fact written.
	MemoryType string   `json:"memory_type,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	// SessionKind coding adds the non-durable drop and the verifier pass.
	SessionKind string `json:"session_kind,omitempty"`
	// RecalledKeys are the memories the session was served; SessionKeys those its own
	// Loom calls read. A fact restating one is dropped.
	RecalledKeys []string `json:"recalled_keys,omitempty"`
	SessionKeys  []string `json:"session_keys,omitempty"`
	// Steps is the pipeline in order (default: every step); Skip leaves steps out.
	Steps  []string `json:"steps,omitempty"`
	Skip   []string `json:"skip,omitempty"`
	DryRun bool     `json:"dry_run,omitempty"`
	// Defer commits the request for a worker and answers its queue_id at once; unset,
	// an agent in LOOM_EXTRACTION_DEFER_AGENTS defers.
	Defer *bool `json:"defer,omitempty"`
}

// Names are the identity names the request gives.
func (r *Request) Names() route.Names {
	return route.Names{Agent: r.Agent, UserID: r.UserID, SessionID: r.SessionID}
}

// Fact is one fact the model extracted and what became of it.
type Fact struct {
	Key          string        `json:"key"`
	Value        string        `json:"value"`
	MessageIndex int           `json:"message_index"`
	Verdict      string        `json:"verdict"`
	Revised      bool          `json:"revised,omitempty"` // the key held another value, which this version replaces
	MemoryID     string        `json:"memory_id,omitempty"`
	VersionText  string        `json:"version_text,omitempty"`
	Status       memrow.Status `json:"status,omitempty"`
	MergedInto   string        `json:"merged_into,omitempty"`
	DuplicateOf  string        `json:"duplicate_of,omitempty"`
	ConflictWith []string      `json:"conflict_with,omitempty"`
	DroppedBy    string        `json:"dropped_by,omitempty"`
	Reason       string        `json:"reason,omitempty"`
	About        string        `json:"about,omitempty"`       // "agent": a rule about the agent itself
	LearningID   string        `json:"learning_id,omitempty"` // the learnings queue's candidate it was filed as
}

// Verdicts of a fact beyond the write's own (Verdict).
const (
	factDropped    = "dropped"     // a step dropped it before the write
	factNotWritten = "not_written" // the pipeline ran without loom.bulk_write
	// VerdictMerge is the write's verdict of a value already stored, which merges into
	// the memory that holds it.
	VerdictMerge = "merge"
	// VerdictLearning: a rule about the agent itself, filed to the learnings queue
	// (learnings.list) instead of the memories.
	VerdictLearning = "learning"
)

// Forgotten is a row the transcript asked to forget.
type Forgotten struct {
	Key          string `json:"key"`
	MessageIndex int    `json:"message_index"`
	MemoryID     string `json:"memory_id,omitempty"`
	Agent        string `json:"agent,omitempty"`
	UserID       string `json:"user_id,omitempty"`
	SessionID    string `json:"session_id,omitempty"`
	Retired      bool   `json:"retired"`
	Skipped      string `json:"skipped,omitempty"` // why not: missing, locked, written, not_written
}

// Usage is what the request's model calls cost.
type Usage struct {
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// Answer is memory.set_from_messages' answer: every fact with its key, verdict and
// the message it came from; or, deferred, the request's queue_id.
type Answer struct {
	Namespace  string       `json:"namespace"`
	Agent      string       `json:"agent"`
	UserID     string       `json:"user_id"`
	SessionID  string       `json:"session_id"`
	Deferred   bool         `json:"deferred,omitempty"`
	QueueID    string       `json:"queue_id,omitempty"`
	Status     string       `json:"status,omitempty"`
	Facts      []Fact       `json:"facts"`
	Forgotten  []Forgotten  `json:"forgotten"`
	Superseded []string     `json:"superseded"`
	Steps      []StepReport `json:"steps"`
	ModelCalls int          `json:"model_calls"`
	// ModelMs is the time the request spent waiting for the provider.
	ModelMs float64 `json:"model_ms"`
	Usage   Usage   `json:"usage"`
	// TurnIDs are the transcript's turns as kept in the conversation's record, in
	// message order (memory.recall reads them); none for a dry run.
	TurnIDs []string `json:"turn_ids,omitempty"`
	DryRun  bool     `json:"dry_run,omitempty"`

	// Wrote: the run committed facts or retirements.
	Wrote bool `json:"-"`
}

// Committed reports whether the request committed anything: facts, or its deferral.
func (a *Answer) Committed() bool { return a.Wrote || a.Deferred }

// Outcome is the answer's metrics label.
func (a *Answer) Outcome() string {
	switch {
	case a.Deferred:
		return "deferred"
	case a.DryRun:
		return "dry_run"
	case !a.Wrote:
		return "nothing_written"
	}
	return "ok"
}

// Check validates a request before anything runs and resolves its steps; maxChars is
// the transcript's limit (LOOM_EXTRACTION_MAX_CHARS).
func Check(req *Request, id memrow.Identity, maxChars int) ([]string, error) {
	return check(req, id, maxChars, nil)
}

// check is Check with the steps an operator registered.
func check(req *Request, id memrow.Identity, maxChars int, registered *Steps) ([]string, error) {
	agentUserSession := id
	agentUserSession.MemoryKey = "k"
	if err := agentUserSession.Validate(); err != nil {
		return nil, err
	}
	if len(req.Messages) == 0 || len(req.Messages) > maxTranscriptMessages {
		return nil, httperr.Validation("messages", fmt.Sprintf("messages must hold 1 to %d messages", maxTranscriptMessages))
	}
	chars := 0
	for i, m := range req.Messages {
		switch m.Role {
		case roleUser, roleAssistant, roleSystem, roleTool:
		default:
			return nil, httperr.Validation(fmt.Sprintf("messages[%d].role", i), "role must be user, assistant, system or tool")
		}
		if strings.TrimSpace(m.Content) == "" {
			return nil, httperr.Validation(fmt.Sprintf("messages[%d].content", i), "content must be non-empty text")
		}
		if err := memrow.CheckText(fmt.Sprintf("messages[%d].content", i), m.Content); err != nil {
			return nil, err
		}
		chars += utf8.RuneCountInString(m.Content)
	}
	if chars > maxChars {
		return nil, httperr.Validation("messages", fmt.Sprintf("the transcript has %d characters; at most %d (LOOM_EXTRACTION_MAX_CHARS)",
			chars, maxChars))
	}
	if err := checkOptions(req); err != nil {
		return nil, err
	}
	return resolveSteps(req.Steps, req.Skip, registered)
}

// checkOptions checks what a request asks besides its transcript.
func checkOptions(req *Request) error {
	if req.MemoryType != "" {
		if err := memrow.ValidateName("memory_type", req.MemoryType); err != nil {
			return err
		}
	}
	if req.Tags != nil {
		if err := memrow.ValidateTags(req.Tags); err != nil {
			return err
		}
	}
	switch req.SessionKind {
	case "", sessionChat, sessionCoding:
	default:
		return httperr.Validation("session_kind", "session_kind must be chat or coding")
	}
	for field, keys := range map[string][]string{"recalled_keys": req.RecalledKeys, "session_keys": req.SessionKeys} {
		if len(keys) > maxListedKeys {
			return httperr.Validation(field, fmt.Sprintf("%s names at most %d keys", field, maxListedKeys))
		}
		for _, k := range keys {
			if err := memrow.ValidateKey(k); err != nil {
				return httperr.Validation(field, field+" holds an invalid key")
			}
		}
	}
	if req.DryRun && req.Defer != nil && *req.Defer {
		return httperr.Validation("defer", "a dry run is answered at once; it cannot be deferred")
	}
	return nil
}
