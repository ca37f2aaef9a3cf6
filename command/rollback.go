package command

import (
	"context"
	"errors"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// namespace.rollback returns every key of a namespace to its state at as_of: the
// version it held then (the largest at or before as_of: a version is a wall-clock
// nanosecond) comes back as a new revision, and a key that had no live version then is
// tombstoned. It restores heads, not exact state: history stays, and what the heads
// derive is rebuilt from the new revisions. It plans from the authority's journal,
// which holds every committed row, a batch of heads at a time in key order, and
// commits each batch over the heads read just before it. A dry run (the default)
// answers the same plan and writes nothing.

// rollbackListMax bounds the changes an answer lists; the counts are always whole.
const rollbackListMax = 1000

// Rollback actions.
const (
	rollbackReinstate = "reinstate" // the version at as_of comes back
	rollbackTombstone = "tombstone" // the key had no live version at as_of
)

// rollbackRequest is POST /v1/namespaces/{ns}:rollback.
type rollbackRequest struct {
	AsOf   string `json:"as_of"`
	DryRun *bool  `json:"dry_run"` // default true
}

// rollbackChange is one key the rollback changes, or refuses to.
type rollbackChange struct {
	MemoryKey string `json:"memory_key"`
	Agent     string `json:"agent"`
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
	Action    string `json:"action"`
	Event     string `json:"event"`
	// FromVersion is the head's version the change was planned over.
	FromVersion int64 `json:"from_version"`
	// ReinstatedVersion is the version at as_of a reinstatement brings back.
	ReinstatedVersion int64 `json:"reinstated_version,omitempty"`
	// Version is the revision's version, once the rollback wrote it.
	Version int64 `json:"version,omitempty"`
	// Code is why a change was refused: MEMORY_LOCKED (the head is locked) or
	// PINNED_CONFLICT (the head is pinned and the change replaces or deletes its value).
	Code string `json:"code,omitempty"`
}

type rollbackCounts struct {
	Keys        int64 `json:"keys"` // heads examined
	Reinstated  int64 `json:"reinstated"`
	Tombstoned  int64 `json:"tombstoned"`
	Refused     int64 `json:"refused"`
	Unavailable int64 `json:"unavailable"` // the version at as_of is no longer in the journal
}

// rollbackAnswer is what namespace.rollback answers: the plan, and whether it was
// carried out.
type rollbackAnswer struct {
	Namespace        string           `json:"namespace"`
	AsOf             time.Time        `json:"as_of"`
	DryRun           bool             `json:"dry_run"`
	Counts           rollbackCounts   `json:"counts"`
	Changes          []rollbackChange `json:"changes"`
	ChangesTruncated bool             `json:"changes_truncated,omitempty"`
	Refused          []rollbackChange `json:"refused"`
	Batches          int              `json:"batches"`
}

// keyPlan is what a rollback does to one key.
type keyPlan struct {
	action string // "" for nothing
	event  events.Type
	row    *memrow.Row // the revision to commit
	// refused is the code of a change the head's lock or pin refuses.
	refused string
}

// planKey decides a key from its head now and its version at as_of (then; nil when
// the key had none).
func planKey(head, then *memrow.Row, at time.Time) keyPlan {
	var kp keyPlan
	if then == nil || then.Tombstone || then.Expired(at) {
		if head.Tombstone {
			return kp
		}
		kp.action, kp.event = rollbackTombstone, events.TypeTombstoned
		kp.row = copyOf(head)
		kp.row.Tombstone = true
	} else {
		if !head.Tombstone && sameState(head, then) {
			return kp
		}
		kp.action, kp.row = rollbackReinstate, copyOf(then)
		kp.row.Identity = head.Identity
		switch {
		case head.Tombstone:
			kp.event = events.TypeRestored
		case head.ContentSHA256 != then.ContentSHA256:
			kp.event = events.TypeRevised
		default:
			kp.event = events.TypeStatusChanged
		}
	}
	if head.Tombstone {
		return kp
	}
	// A lock refuses every change; a pin refuses one that deletes or replaces its value,
	// unless the version that comes back is pinned too (as memory.set's pin does).
	switch {
	case head.Locked:
		kp.refused = httperr.CodeLocked
	case head.Pinned && (kp.action == rollbackTombstone || (head.ContentSHA256 != then.ContentSHA256 && !then.Pinned)):
		kp.refused = httperr.CodePinnedConflict
	}
	return kp
}

// rollback is namespace.rollback (an admin's call).
func (s *Service) rollback(ctx context.Context, p auth.Principal, ns string, req rollbackRequest, requestID string) (*rollbackAnswer, error) {
	if err := p.RequireEveryUser("a namespace rollback"); err != nil {
		return nil, err
	}
	at, err := time.Parse(time.RFC3339Nano, req.AsOf)
	if err != nil {
		return nil, httperr.Validation("as_of", "as_of is required: an RFC 3339 time")
	}
	if at.Year() < 1970 || at.After(s.now()) {
		return nil, httperr.Validation("as_of", "as_of must lie between 1970 and now")
	}
	ans := &rollbackAnswer{Namespace: ns, AsOf: at.UTC(), DryRun: req.DryRun == nil || *req.DryRun,
		Changes: []rollbackChange{}, Refused: []rollbackChange{}}
	var audit *opAudit
	if !ans.DryRun {
		if audit, err = s.startOp(ctx, p, "namespace.rollback", ns, requestID, map[string]any{"as_of": ans.AsOf}); err != nil {
			return nil, httperr.Store("auditing the rollback", err)
		}
	}
	err = s.rollbackPages(ctx, p, ns, at, requestID, ans)
	audit.finish(ctx, ans.Counts, ans.Batches, err)
	if err != nil {
		return nil, err
	}
	return ans, nil
}

// rollbackPages plans, and unless it is a dry run commits, every page of heads.
func (s *Service) rollbackPages(ctx context.Context, p auth.Principal, ns string, at time.Time, requestID string, ans *rollbackAnswer) error {
	var after memrow.Identity
	for {
		page, err := s.headPage(ctx, p.Org, ns, after, s.cfg.RestoreBatchRows, false)
		if err != nil {
			return httperr.Store("reading the namespace's heads", err)
		}
		if len(page) == 0 {
			return nil
		}
		after = page[len(page)-1].Identity
		if err := s.rollbackPage(ctx, p, ns, page, at, requestID, ans); err != nil {
			return err
		}
	}
}

// rollbackPage plans one page of heads and, unless the rollback is a dry run, commits
// its changes over exactly those heads.
func (s *Service) rollbackPage(ctx context.Context, p auth.Principal, ns string, page []*memrow.Row, at time.Time, requestID string, ans *rollbackAnswer) error {
	ids := make([]memrow.Identity, len(page))
	for i, h := range page {
		ids[i] = h.Identity
	}
	then, err := s.versionsAt(ctx, p.Org, ns, ids, at)
	if err != nil {
		return httperr.Store("reading the journal at as_of", err)
	}
	plan := &commitPlan{org: p.Org, namespace: ns, requestID: requestID, policyGeneration: -1}
	var changes []rollbackChange
	for _, h := range page {
		ans.Counts.Keys++
		old, held := then[heads.IdentityKey(h.Identity)]
		if held && old == nil {
			ans.Counts.Unavailable++
			continue
		}
		kp := planKey(h, old, at)
		if kp.action == "" {
			continue
		}
		ch := rollbackChange{MemoryKey: h.MemoryKey, Agent: h.Agent, UserID: h.UserID, SessionID: h.SessionID,
			Action: kp.action, Event: string(kp.event), FromVersion: h.Version, Code: kp.refused}
		if kp.action == rollbackReinstate {
			ch.ReinstatedVersion = old.Version
		}
		if kp.refused != "" {
			ans.Counts.Refused++
			if len(ans.Refused) < rollbackListMax {
				ans.Refused = append(ans.Refused, ch)
			}
			continue
		}
		kp.row.Actor = p.Actor()
		plan.rows = append(plan.rows, &pending{own: true, op: "namespace.rollback", event: kp.event, row: kp.row, readVersion: h.Version, readSeq: h.Seq})
		changes = append(changes, ch)
	}
	if len(plan.rows) > 0 && !ans.DryRun {
		if _, err := s.embedRowsOrStub(ctx, plan.rows); err != nil {
			return err
		}
		err := s.commit(ctx, plan)
		switch {
		case errors.Is(err, errHeadMoved), errors.Is(err, errErased):
			return contended(err).With("batches_written", ans.Batches)
		case err != nil:
			return commitError(err)
		}
		ans.Batches++
		for i := range changes {
			changes[i].Version = plan.rows[i].row.Version
		}
	}
	for _, ch := range changes {
		if ch.Action == rollbackReinstate {
			ans.Counts.Reinstated++
		} else {
			ans.Counts.Tombstoned++
		}
		if len(ans.Changes) < rollbackListMax {
			ans.Changes = append(ans.Changes, ch)
		} else {
			ans.ChangesTruncated = true
		}
	}
	return nil
}
