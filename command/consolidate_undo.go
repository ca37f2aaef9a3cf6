package command

import (
	"context"
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// memory.consolidate_undo: the undo of a consolidation run. Each merged cluster is
// undone in one commit: every merged row whose head is still the run's tombstone is
// restored as the merge read it (its revision at that version, from the journal), and
// the summary is retired (deleted) if it is live. A merged row written again since the
// merge is left as its writer left it, and named in the answer; an erased or redacted
// one is gone. The run is then marked undone, so a second undo answers 409.

// UndoAnswer is memory.consolidate_undo's answer.
type UndoAnswer struct {
	RunID    string     `json:"run_id"`
	Restored int        `json:"restored"`
	Retired  int        `json:"retired"`
	Left     []undoLeft `json:"left"`
}

// undoLeft is a row an undo left as it found it, and why (moved: written since the
// merge; gone: erased or its revision no longer in the journal).
type undoLeft struct {
	MemoryID string `json:"memory_id"`
	Reason   string `json:"reason"`
}

// undoConsolidation is memory.consolidate_undo.
func (s *Service) undoConsolidation(ctx context.Context, p auth.Principal, ns, runID string) (*UndoAnswer, error) {
	run, err := readRun(ctx, s.pool, p.Org, ns, runID)
	if err != nil {
		return nil, httperr.Store("reading the consolidation run", err)
	}
	if run == nil {
		return nil, httperr.NotFound("consolidation run not found")
	}
	if err := consolidationScope(p, run.UserID); err != nil {
		return nil, err
	}
	if run.Status == "undone" {
		return nil, httperr.New(http.StatusConflict, httperr.CodePreconditionFailed, "the consolidation run was undone already")
	}
	ans := &UndoAnswer{RunID: runID, Left: []undoLeft{}}
	for _, c := range run.Clusters {
		for try := 0; ; try++ {
			restored, retired, left, err := s.undoCluster(ctx, p, ns, c)
			if errors.Is(err, errHeadMoved) && try < 3 {
				continue // a head moved between the read and the commit: read them again
			}
			if err != nil {
				return nil, httperr.Store("undoing the consolidation", err)
			}
			ans.Restored, ans.Retired, ans.Left = ans.Restored+restored, ans.Retired+retired, append(ans.Left, left...)
			break
		}
	}
	if _, err := markUndone(context.WithoutCancel(ctx), s.pool, runID); err != nil {
		return nil, httperr.Store("marking the consolidation undone", err)
	}
	s.consolidation.With("undone_runs").Inc()
	return ans, nil
}

// undoCluster undoes one merged cluster in one commit.
func (s *Service) undoCluster(ctx context.Context, p auth.Principal, ns string, c runCluster) (int, int, []undoLeft, error) {
	ids := []string{c.SummaryID}
	for _, m := range c.Merged {
		ids = append(ids, m.MemoryID)
	}
	hs, err := heads.InNamespaceWithIDs(ctx, s.pool, p.Org, ns, ids)
	if err != nil {
		return 0, 0, nil, err
	}
	byID := map[string]*memrow.Row{}
	for _, h := range hs {
		if cur, ok := byID[h.MemoryID]; !ok || h.Version > cur.Version {
			byID[h.MemoryID] = h
		}
	}
	now := s.now()
	var rows []*pending
	var left []undoLeft
	restored, retired := 0, 0
	for _, m := range c.Merged {
		h := byID[m.MemoryID]
		switch {
		case h == nil:
			left = append(left, undoLeft{MemoryID: m.MemoryID, Reason: "gone"})
			continue
		case h.Version != m.TombstoneVersion || !h.Tombstone:
			left = append(left, undoLeft{MemoryID: m.MemoryID, Reason: "moved"})
			continue
		}
		before, err := revisionAt(ctx, s.pool, h.Identity, m.ReadVersion)
		if err != nil {
			return 0, 0, nil, err
		}
		if before == nil || before.Redacted {
			// Erased, or redacted since the merge: nothing to bring back.
			left = append(left, undoLeft{MemoryID: m.MemoryID, Reason: "gone"})
			continue
		}
		r := copyOf(before)
		r.Tombstone, r.Version, r.UpdatedAt, r.Actor, r.Seq = false, memrow.NextVersion(now, h.Version), now, p.Actor(), 0
		rows = append(rows, &pending{own: true, op: opConsolidateUndo, event: events.TypeRestored, row: r,
			readVersion: h.Version, readSeq: h.Seq})
		restored++
	}
	if h := byID[c.SummaryID]; h != nil && h.Live(now) {
		t := copyOf(h)
		t.Tombstone, t.Version, t.UpdatedAt, t.Actor = true, memrow.NextVersion(now, h.Version), now, p.Actor()
		rows = append(rows, &pending{own: true, op: opConsolidateUndo, event: events.TypeTombstoned, row: t,
			readVersion: h.Version, readSeq: h.Seq})
		retired++
	}
	if len(rows) == 0 {
		return 0, 0, left, nil
	}
	err = s.commit(ctx, &commitPlan{org: p.Org, namespace: ns, rows: rows, requestID: "consolidation_undo:" + c.SummaryID,
		policyGeneration: -1, inTx: func(context.Context, pgx.Tx) error { return nil }})
	if err != nil {
		return 0, 0, nil, err
	}
	return restored, retired, left, nil
}

// revisionAt reads a key's revision at version from the journal, nil when the journal
// no longer holds it.
func revisionAt(ctx context.Context, q heads.Querier, id memrow.Identity, version int64) (*memrow.Row, error) {
	revs, err := heads.KeyRevisions(ctx, q, id)
	if err != nil {
		return nil, err
	}
	var found *memrow.Row
	for _, r := range revs {
		if r.Version == version && (found == nil || r.Seq > found.Seq) {
			found = r
		}
	}
	return found, nil
}
