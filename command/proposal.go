package command

import (
	"context"
	"net/http"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// memory.proposal_decide settles a proposal (a row written with proposed=true). An
// accept states the proposal's value as the fact through memory.set's admission, the
// verdict against its peers included, over the proposal's own head: it may be new, a
// duplicate, a conflict, or refused by a pinned peer, as any write may. A merge (a
// peer already states it) writes no fact; the proposal is then marked a duplicate of
// that peer. A reject marks it rejected. Either way the revision is on the topic, with
// op memory.proposal_decide and the proposal's identity: that is how its writer hears.

// Decisions.
const (
	decisionAccept = "accept"
	decisionReject = "reject"
)

// decideBody is the body of POST .../memories/{key}:decide.
type decideBody struct {
	Decision string `json:"decision"`
	copyBody
}

// decideCall is a decision over the key the route and the body name.
type decideCall struct {
	origin
	namespace, key string
	body           decideBody
}

func notAProposal() error {
	return httperr.New(http.StatusConflict, CodePreconditionFailed, "the memory is not a proposal: nothing to decide")
}

// decideProposal is memory.proposal_decide.
func (s *Service) decideProposal(ctx context.Context, p auth.Principal, r decideCall) (writeAnswer, error) {
	switch r.body.Decision {
	case decisionAccept, decisionReject:
	default:
		return nil, httperr.Validation("decision", "decision must be accept or reject")
	}
	id, err := keyIdentity(p, r.namespace, r.key, r.body.names())
	if err != nil {
		return nil, err
	}
	if r.body.Decision == decisionReject {
		return s.runCopy(ctx, p, copyCall{origin: r.origin, namespace: r.namespace, key: r.key, names: r.body.names(), version: -1,
			op: decideOp(func(c *copyWrite) { c.row.Status = memrow.StatusRejected })})
	}
	head, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return nil, httperr.Store("reading the head", err)
	}
	if head == nil || !head.Live(s.now()) || !p.Sees(head.UserID, head.SessionID) {
		return nil, httperr.NotFound("memory not found")
	}
	if head.Status != memrow.StatusProposed {
		return nil, notAProposal()
	}
	req := acceptRequest(head)
	w, err := newSetWrite("memory.proposal_decide", p, id, req, r.requestID)
	if err != nil {
		return nil, err
	}
	w.hold, w.requireProposal = r.hold, true
	ans, err := s.runSet(ctx, w)
	if err != nil {
		return nil, err
	}
	if ans.Written || ans.Verdict != VerdictMerge || ans.MergedInto == nil {
		return ans, nil
	}
	// A peer already states the fact: the proposal repeats it, and is marked so.
	into := ans.MergedInto
	cp, err := s.runCopy(ctx, p, copyCall{origin: r.origin, namespace: r.namespace, key: r.key, names: r.body.names(), version: -1,
		op: decideOp(func(c *copyWrite) { c.row.Status, c.row.DuplicateOf = memrow.StatusDuplicate, into.MemoryID })})
	if err != nil {
		return nil, err
	}
	ans.Written, ans.Event, ans.Status, ans.DuplicateOf = true, string(events.TypeStatusChanged), memrow.StatusDuplicate, into.MemoryID
	ans.Version, _ = cp["version"].(int64)
	ans.Seq, _ = cp["seq"].(int64)
	ans.VersionText = memrow.VersionText(ans.Version)
	return ans, nil
}

// decideOp is the copy writer of a decision that only marks the proposal.
func decideOp(mark func(*copyWrite)) copyOp {
	return copyOp{op: "memory.proposal_decide", event: events.TypeStatusChanged, change: func(_ context.Context, _ *Service, c *copyWrite) error {
		if c.head.Status != memrow.StatusProposed {
			return notAProposal()
		}
		mark(c)
		return nil
	}}
}

// acceptRequest is the write an accept makes: the proposal's value and what describes
// it, no longer proposed, and only over that very value.
func acceptRequest(head *memrow.Row) *setRequest {
	confidence := head.Confidence
	req := &setRequest{Value: head.Value, MemoryType: head.MemoryType, Tags: head.Tags, Confidence: &confidence,
		ValidAt: head.ValidAt, ValidTo: head.ValidTo, IfMatchSHA256: head.ContentSHA256, Sensitivity: head.Sensitivity}
	if head.SourceClass != SourceDirect {
		req.SourceClass = head.SourceClass
	}
	return req
}
