package command

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// memory.set_from_messages (POST /v1/namespaces/{ns}/memories:fromMessages) extracts
// the durable facts of a conversation with a model and writes them through
// memory.bulk_set's path, so every fact is judged as any write is. It runs the
// pipeline of extract_pipeline.go inline, or, deferred, commits the request and
// answers its queue_id at once (extract_queue.go); an extraction worker runs it later
// (extract_worker.go).

const opFromMessages = "memory.set_from_messages"

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

// transcriptMessage is one message of a conversation.
type transcriptMessage struct {
	Role    string     `json:"role"`
	Content string     `json:"content"`
	At      *time.Time `json:"at,omitempty"` // when it was said: the facts it states are valid from then
}

// fromMessagesRequest is the body of memory.set_from_messages; a deferred request is
// committed as it is and run as it is.
type fromMessagesRequest struct {
	Messages  []transcriptMessage `json:"messages"`
	Agent     string              `json:"agent,omitempty"`
	UserID    string              `json:"user_id,omitempty"`
	SessionID string              `json:"session_id,omitempty"`
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

func (r *fromMessagesRequest) names() route.Names {
	return route.Names{Agent: r.Agent, UserID: r.UserID, SessionID: r.SessionID}
}

// extractedFact is one fact the model extracted and what became of it.
type extractedFact struct {
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
}

// Verdicts of a fact beyond the write's own (Verdict).
const (
	factDropped    = "dropped"     // a step dropped it before the write
	factNotWritten = "not_written" // the pipeline ran without loom.bulk_write
)

// forgottenRow is a row the transcript asked to forget.
type forgottenRow struct {
	Key          string `json:"key"`
	MessageIndex int    `json:"message_index"`
	MemoryID     string `json:"memory_id,omitempty"`
	Agent        string `json:"agent,omitempty"`
	UserID       string `json:"user_id,omitempty"`
	SessionID    string `json:"session_id,omitempty"`
	Retired      bool   `json:"retired"`
	Skipped      string `json:"skipped,omitempty"` // why not: missing, locked, written, not_written
}

type usageView struct {
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// fromMessagesAnswer is memory.set_from_messages' answer: every fact with its key,
// verdict and the message it came from; or, deferred, the request's queue_id.
type fromMessagesAnswer struct {
	Namespace  string          `json:"namespace"`
	Agent      string          `json:"agent"`
	UserID     string          `json:"user_id"`
	SessionID  string          `json:"session_id"`
	Deferred   bool            `json:"deferred,omitempty"`
	QueueID    string          `json:"queue_id,omitempty"`
	Status     string          `json:"status,omitempty"`
	Facts      []extractedFact `json:"facts"`
	Forgotten  []forgottenRow  `json:"forgotten"`
	Superseded []string        `json:"superseded"`
	Steps      []stepReport    `json:"steps"`
	ModelCalls int             `json:"model_calls"`
	// ModelMs is the time the request spent waiting for the provider.
	ModelMs float64   `json:"model_ms"`
	Usage   usageView `json:"usage"`
	DryRun  bool      `json:"dry_run,omitempty"`

	wrote bool
}

func (a *fromMessagesAnswer) committed() bool { return a.wrote || a.Deferred }

func (a *fromMessagesAnswer) outcome() string {
	switch {
	case a.Deferred:
		return "deferred"
	case a.DryRun:
		return "dry_run"
	case !a.wrote:
		return "nothing_written"
	}
	return "ok"
}

// fromMessagesCall is a memory.set_from_messages of the route's namespace.
type fromMessagesCall struct {
	origin
	namespace string
	body      *fromMessagesRequest
}

// fromMessages is memory.set_from_messages.
func (s *Service) fromMessages(ctx context.Context, p auth.Principal, r fromMessagesCall) (*fromMessagesAnswer, error) {
	req := r.body
	id, other := route.Identity(p, r.namespace, "", req.names())
	if other {
		return nil, otherUser()
	}
	steps, err := s.checkTranscript(req, id)
	if err != nil {
		return nil, err
	}
	bill := llm.Bill{Org: p.Org, Namespace: r.namespace, Purpose: llm.PurposeExtraction}
	if err := s.checkModels(ctx, bill); err != nil {
		return nil, err
	}
	deferred := req.Defer != nil && *req.Defer
	if req.Defer == nil && !req.DryRun {
		deferred = s.cfg.Extraction.Defers(id.Agent)
	}
	if deferred {
		return s.enqueue(ctx, p, r.namespace, id, req)
	}
	st := &extractState{p: p, ns: r.namespace, req: req, identity: id, bill: bill, origin: r.origin}
	return s.extract(ctx, st, steps)
}

// checkModels refuses a request no model call can be made for: no provider, or a
// namespace that spent its daily cap.
func (s *Service) checkModels(ctx context.Context, bill llm.Bill) error {
	if s.models == nil {
		return llm.NotConfigured(bill.Purpose)
	}
	return s.models.Check(ctx, bill)
}

// checkTranscript validates a request before anything runs and resolves its steps.
func (s *Service) checkTranscript(req *fromMessagesRequest, id memrow.Identity) ([]string, error) {
	if err := validIdentity(id); err != nil {
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
	if chars > s.cfg.Extraction.MaxChars {
		return nil, httperr.Validation("messages", fmt.Sprintf("the transcript has %d characters; at most %d (LOOM_EXTRACTION_MAX_CHARS)",
			chars, s.cfg.Extraction.MaxChars))
	}
	if req.MemoryType != "" {
		if err := memrow.ValidateName("memory_type", req.MemoryType); err != nil {
			return nil, err
		}
	}
	if req.Tags != nil {
		if err := memrow.ValidateTags(req.Tags); err != nil {
			return nil, err
		}
	}
	switch req.SessionKind {
	case "", sessionChat, sessionCoding:
	default:
		return nil, httperr.Validation("session_kind", "session_kind must be chat or coding")
	}
	for field, keys := range map[string][]string{"recalled_keys": req.RecalledKeys, "session_keys": req.SessionKeys} {
		if len(keys) > maxListedKeys {
			return nil, httperr.Validation(field, fmt.Sprintf("%s names at most %d keys", field, maxListedKeys))
		}
		for _, k := range keys {
			if err := memrow.ValidateKey(k); err != nil {
				return nil, httperr.Validation(field, field+" holds an invalid key")
			}
		}
	}
	if req.DryRun && req.Defer != nil && *req.Defer {
		return nil, httperr.Validation("defer", "a dry run is answered at once; it cannot be deferred")
	}
	return resolvePipeline(req.Steps, req.Skip)
}

// validIdentity checks the agent, user and session of a write that names its keys
// itself.
func validIdentity(id memrow.Identity) error {
	id.MemoryKey = "k"
	return id.Validate()
}

// extract runs the pipeline over a request and answers what it did.
func (s *Service) extract(ctx context.Context, st *extractState, steps []string) (*fromMessagesAnswer, error) {
	if err := st.run(ctx, s, steps); err != nil {
		return nil, err
	}
	return st.answer(s.now(), slices.Contains(steps, stepBulkWrite)), nil
}

// answer lists every fact in transcript order with what became of it.
func (st *extractState) answer(now time.Time, writes bool) *fromMessagesAnswer {
	a := &fromMessagesAnswer{Namespace: st.ns, Agent: st.identity.Agent, UserID: st.identity.UserID, SessionID: st.identity.SessionID,
		Facts: []extractedFact{}, Forgotten: []forgottenRow{}, Superseded: []string{}, Steps: st.steps, ModelCalls: st.modelCalls,
		ModelMs: float64(st.modelTime.Microseconds()) / 1000, DryRun: st.req.DryRun,
		Usage: usageView{PromptTokens: st.usage.PromptTokens, CompletionTokens: st.usage.CompletionTokens, CostUSD: st.usage.CostUSD}}
	type placed struct {
		f   extractedFact
		msg int
	}
	var all []placed
	for _, c := range st.dropped {
		key := c.key
		if key == "" {
			key = c.rawKey
		}
		f := extractedFact{Key: key, Value: c.value, MessageIndex: c.msg, Verdict: factDropped, DroppedBy: c.droppedBy, Reason: c.reason}
		if c.duplicateOf != "" {
			// A value already stored merges into the memory that holds it.
			f.Verdict, f.MergedInto = string(VerdictMerge), c.duplicateOf
		}
		all = append(all, placed{f, c.msg})
	}
	outcomes := map[int]extractedFact{}
	if b := st.written; b != nil {
		outcomes = b.outcomes(now)
		a.Superseded = b.ans.Superseded
		a.wrote = b.committed()
	}
	for i, c := range st.facts {
		f, ok := outcomes[i]
		if !ok {
			f = extractedFact{Verdict: factNotWritten}
		}
		f.Key, f.Value, f.MessageIndex = c.key, c.value, c.msg
		all = append(all, placed{f, c.msg})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].msg < all[j].msg })
	for _, p := range all {
		a.Facts = append(a.Facts, p.f)
	}
	a.Forgotten = st.forgottenRows(writes)
	return a
}

// forgottenRows reports each key the transcript asked to forget.
func (st *extractState) forgottenRows(writes bool) []forgottenRow {
	out := []forgottenRow{}
	done := map[string]bool{}
	msgOf := map[string]int{}
	for _, f := range st.forgets {
		msgOf[f.key] = f.msg
	}
	if b := st.written; b != nil {
		for _, r := range b.retired {
			out = append(out, forgottenRow{Key: r.id.MemoryKey, MessageIndex: msgOf[r.id.MemoryKey], MemoryID: r.memoryID,
				Agent: r.id.Agent, UserID: r.id.UserID, SessionID: r.id.SessionID, Retired: r.retired && !b.dryRun, Skipped: r.skipped})
			done[r.id.MemoryKey] = true
		}
	}
	for _, f := range st.forgets {
		if done[f.key] {
			continue
		}
		skipped := "missing"
		if !writes {
			skipped = factNotWritten
		}
		out = append(out, forgottenRow{Key: f.key, MessageIndex: f.msg, Skipped: skipped})
	}
	return out
}

// outcomes is what the batch made of each entry, by index, as its last round left it.
func (b *bulkWrite) outcomes(now time.Time) map[int]extractedFact {
	out := map[int]extractedFact{}
	byIndex := map[int]*entry{}
	for _, e := range b.entries {
		byIndex[e.index] = e
	}
	for _, w := range b.ans.Written {
		e := byIndex[w.Index]
		f := extractedFact{Verdict: string(w.Verdict), MemoryID: w.MemoryID, VersionText: w.VersionText, Status: w.Status,
			Revised: e.head != nil && e.head.Live(now) && e.head.ContentSHA256 != e.row.ContentSHA256}
		if e.row != nil {
			f.DuplicateOf, f.ConflictWith = e.row.DuplicateOf, e.row.ConflictWith
		}
		out[w.Index] = f
	}
	for _, m := range b.ans.Merged {
		out[m.Index] = extractedFact{Verdict: string(VerdictMerge), MergedInto: m.MergedInto}
	}
	for verdict, list := range map[string][]int{"skipped_pinned": b.ans.SkippedPinned, "skipped_locked": b.ans.SkippedLocked,
		"skipped_unchanged": b.ans.SkippedUnchanged, "blacklisted": b.ans.Blacklisted} {
		for _, i := range list {
			out[i] = extractedFact{Verdict: verdict}
		}
	}
	return out
}

func (b *bulkWrite) committed() bool {
	if b.dryRun {
		return false
	}
	if len(b.ans.Written) > 0 {
		return true
	}
	for _, r := range b.retired {
		if r.retired {
			return true
		}
	}
	return false
}
