package command

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// decision.record writes a decision memory (memory_type "decision", identified by its
// key: memory-architecture.md, the verdict's KeyIdentifiedTypes) and its record in one
// commit: the decision and its rationale are the memory's value ({"decision",
// "rationale"}), sealed as every row's text is; loom.decision_records holds who decided
// and which keys it supersedes. The write goes through memory.bulk_set's admission and
// commit, so the decision meets every check a write meets. A delete of the decision
// retires its record in the delete's transaction (copy.go, deleteOp).

// Limits of a decision record.
const (
	maxSupersedes      = 32
	maxDecidedByBytes  = 256
	maxDecisionRunes   = 4000
	decisionMemoryType = "decision"
)

// decisionRequest is the body of POST /v1/namespaces/{ns}/decisions.
type decisionRequest struct {
	Key        string   `json:"key"`
	Decision   string   `json:"decision"`
	Rationale  string   `json:"rationale"`
	DecidedBy  string   `json:"decided_by"`
	Supersedes []string `json:"supersedes"`
	Tags       []string `json:"tags"`
	Agent      string   `json:"agent"`
	UserID     string   `json:"user_id"`
	SessionID  string   `json:"session_id"`
}

// decisionAnswer is what decision.record answers.
type decisionAnswer struct {
	MemoryID    string         `json:"memory_id"`
	MemoryKey   string         `json:"memory_key"`
	Version     int64          `json:"version"`
	VersionText string         `json:"version_text"`
	Seq         int64          `json:"seq"`
	Verdict     Verdict        `json:"verdict"`
	Written     bool           `json:"written"`
	Record      decisionRecord `json:"record"`
}

func (a *decisionAnswer) committed() bool { return a.Written }

func (a *decisionAnswer) outcome() string {
	if a.Written {
		return "ok"
	}
	return "unchanged"
}

// decisionCall is a decision.record of the route's namespace.
type decisionCall struct {
	origin
	namespace string
	body      decisionRequest
}

// checkDecision refuses a request that is not a whole decision, naming the field.
func checkDecision(r *decisionRequest) error {
	switch {
	case r.Key == "":
		return httperr.Validation("key", "key is required: the decision's memory key")
	case r.Decision == "":
		return httperr.Validation("decision", "decision is required: what was decided")
	case len([]rune(r.Decision)) > maxDecisionRunes || len([]rune(r.Rationale)) > maxDecisionRunes:
		return httperr.Validation("decision", fmt.Sprintf("decision and rationale are at most %d characters each", maxDecisionRunes))
	case r.DecidedBy == "":
		return httperr.Validation("decided_by", "decided_by is required: who decided")
	case len(r.DecidedBy) > maxDecidedByBytes:
		return httperr.Validation("decided_by", fmt.Sprintf("decided_by is at most %d bytes", maxDecidedByBytes))
	case len(r.Supersedes) > maxSupersedes:
		return httperr.Validation("supersedes", fmt.Sprintf("supersedes names at most %d keys", maxSupersedes))
	}
	for _, k := range r.Supersedes {
		if k == "" || k == r.Key {
			return httperr.Validation("supersedes", "supersedes names other decisions' keys")
		}
	}
	return nil
}

// recordDecision is decision.record.
func (s *Service) recordDecision(ctx context.Context, p auth.Principal, r decisionCall) (*decisionAnswer, error) {
	body := r.body
	if err := checkDecision(&body); err != nil {
		return nil, err
	}
	if body.Supersedes == nil {
		body.Supersedes = []string{}
	}
	value, err := json.Marshal(map[string]string{"decision": body.Decision, "rationale": body.Rationale})
	if err != nil {
		return nil, err
	}
	fields := map[string]any{"key": body.Key, "value": json.RawMessage(value), "memory_type": decisionMemoryType}
	for k, v := range map[string]string{"agent": body.Agent, "user_id": body.UserID, "session_id": body.SessionID} {
		if v != "" {
			fields[k] = v
		}
	}
	if body.Tags != nil {
		fields["tags"] = body.Tags
	}
	entry, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	id, other, err := route.WriteIdentity(p, r.namespace, body.Key, route.Names{Agent: body.Agent, UserID: body.UserID, SessionID: body.SessionID})
	if err != nil {
		return nil, err
	}
	if other {
		return nil, otherUser()
	}
	rec := decisionRecord{DecidedBy: body.DecidedBy, Supersedes: body.Supersedes, RecordedBy: p.Actor()}
	inCommit := func(ctx context.Context, tx pgx.Tx) error {
		head, err := heads.Read(ctx, tx, id)
		if err != nil || head == nil || head.MemoryType != decisionMemoryType {
			return fmt.Errorf("read the decision just written: %v", err)
		}
		return writeDecisionRecord(ctx, tx, s.kek, head, rec)
	}
	b, err := s.runBulk(ctx, p, bulkCall{origin: r.origin, namespace: r.namespace, body: bulkRequest{Entries: []json.RawMessage{entry}}},
		bulkOptions{op: "decision.record", inCommit: inCommit})
	if err != nil {
		return nil, err
	}
	ans := &decisionAnswer{MemoryKey: body.Key, Record: rec}
	for _, w := range b.ans.Written {
		ans.Written, ans.MemoryID, ans.Version, ans.Seq, ans.Verdict = true, w.MemoryID, w.Version, w.Seq, w.Verdict
	}
	if !ans.Written {
		head, err := heads.Read(ctx, s.pool, id)
		if err != nil {
			return nil, httperr.Store("reading the decision", err)
		}
		if head == nil || !head.Live(s.now()) {
			return nil, httperr.New(http.StatusConflict, CodePreconditionFailed, "the decision was not written: "+skipReason(b.ans))
		}
		ans.MemoryID, ans.Version, ans.Seq, ans.Verdict = head.MemoryID, head.Version, head.Seq, VerdictRestatement
	}
	ans.VersionText = memrow.VersionText(ans.Version)
	ans.Record.MemoryID, ans.Record.Version = ans.MemoryID, ans.Version
	return ans, nil
}

// skipReason says why a batch of one wrote nothing.
func skipReason(a *bulkAnswer) string {
	switch {
	case len(a.Blacklisted) > 0:
		return "the value matches the namespace's blacklist"
	case len(a.SkippedLocked) > 0:
		return "the key is locked"
	case len(a.SkippedPinned) > 0:
		return "a pinned memory holds the key"
	case len(a.Merged) > 0:
		return "it merged into " + a.Merged[0].MergedInto
	}
	return "it repeats the decision the key holds"
}
