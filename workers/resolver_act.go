package workers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
)

// Acting (memory-architecture, "Acting"): every resolver write is a copy of the heads
// it read, committed through the one commit at the versions it read, so the heads are
// locked (in identity order) and checked from the read to the write: a user's write,
// pin or Undo that landed since sends the pair back to be read again, and one that
// lands after finds the resolver's revision under it. Right before the rows land, in
// the same transaction, the org is checked for an erasure.

// Ops of the resolver's revisions: the journal's, the topic's and the audit's record
// of what it did. A retirement is memory.auto_supersede; memory.unsupersede undoes it.
const (
	opAutoSupersede = "memory.auto_supersede"
	// resolverActor is the pipeline actor the resolver's copies carry (worker:<name>).
	resolverActor   = "worker:conflict-resolver"
	opConflictFlag  = "memory.conflict_flag"
	opConflictClear = "memory.conflict_clear"
	// opConflictResolver is the op of the resolver's own audit row of a decision.
	opConflictResolver = "memory.conflict_resolver"
)

// errOrgErasing stops a worker's write: an erasure of the org is running.
var errOrgErasing = errors.New("an erasure of the org is running")

// errNotActable: one of the pair is no longer as the judgement read it.
var errNotActable = errors.New("the pair changed since it was judged")

// refuseUnderErasure is a commit's last check for a worker's write: no erasure of the
// org is running. Every commit holds the org's policy lock shared, and an erasure is
// recorded under it held exclusively, so a commit either ends before the erasure is
// recorded or sees it here.
func refuseUnderErasure(org string) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		running, err := command.ErasureRunning(ctx, tx, org)
		if err != nil {
			return fmt.Errorf("read the org's erasures: %w", err)
		}
		if running {
			return errOrgErasing
		}
		return nil
	}
}

// errAllowlisted stops a flag or a retirement of a pair the namespace's conflict
// allowlist took in since the pair was judged.
var errAllowlisted = errors.New("the pair is on the namespace's conflict allowlist")

// refuseUnlisted is refuseUnderErasure, and for a flag or a retirement also the
// allowlist's last check: a pair listed since its judgement read the policy is left
// alone (a list change holds the policy lock the commit holds shared).
func refuseUnlisted(j, p *memrow.Row, a pairAction) func(context.Context, pgx.Tx) error {
	erasing := refuseUnderErasure(j.Org)
	return func(ctx context.Context, tx pgx.Tx) error {
		if err := erasing(ctx, tx); err != nil || a == actClear {
			return err
		}
		listed, err := command.PairAllowlisted(ctx, tx, j.Org, j.Namespace, j.MemoryID, p.MemoryID)
		if err != nil {
			return fmt.Errorf("read the conflict allowlist: %w", err)
		}
		if listed {
			return errAllowlisted
		}
		return nil
	}
}

// orgErasing reports whether an erasure of the org is running.
func (s *Service) orgErasing(ctx context.Context, org string) (bool, error) {
	running, err := command.ErasureRunning(ctx, s.pool, org)
	if err != nil {
		return false, fmt.Errorf("read the org's erasures: %w", err)
	}
	return running, nil
}

// actable reports whether a row may be acted on: live, unexpired, a served fact,
// neither pinned nor locked, and still holding the value judged.
func actable(r *memrow.Row, sha string, now time.Time) bool {
	return r != nil && r.Served(now) && !r.Pinned && !r.Locked && r.ContentSHA256 == sha
}

// actOn applies an action to a pair: it re-reads both heads, checks them, builds the
// copies and commits them over the versions read; a head that moved meanwhile is read
// again, twice at most. It reports whether anything was written.
func (s *Service) actOn(ctx context.Context, judged, peer *memrow.Row, jp judgedPair, judgementID string) (bool, error) {
	a := jp.Action
	for try := 0; try < 3; try++ {
		hs, err := heads.Many(ctx, s.pool, judged.Org, judged.Namespace, []memrow.Identity{judged.Identity, peer.Identity})
		if err != nil {
			return false, fmt.Errorf("read the pair: %w", err)
		}
		j, p := hs[heads.IdentityKey(judged.Identity)], hs[heads.IdentityKey(peer.Identity)]
		now := s.now()
		if !actable(j, judged.ContentSHA256, now) || !actable(p, peer.ContentSHA256, now) ||
			j.MemoryID != judged.MemoryID || p.MemoryID != peer.MemoryID {
			return false, errNotActable
		}
		rows := pairRows(a, j, p)
		if len(rows) == 0 {
			return false, nil // acting twice changes nothing
		}
		err = s.cmd.CommitWorkerPlan(ctx, command.WorkerPlan{Org: j.Org, Namespace: j.Namespace, Rows: rows, RequestID: judgementID,
			InTx: refuseUnlisted(j, p, a), Note: decisionNote(j, jp)})
		switch {
		case errors.Is(err, command.ErrHeadMoved):
			continue
		case errors.Is(err, errAllowlisted):
			return false, errNotActable
		case err != nil:
			return false, err
		}
		return true, nil
	}
	return false, errNotActable
}

// decisionNote is the resolver's audit row of the action on a pair (memory-architecture,
// "Acting": a hash-only memory.conflict_resolver row of the pairs, actions, verdicts and
// confidences, never the text). Each pair's action is its own commit, so each carries
// its own row.
func decisionNote(judged *memrow.Row, jp judgedPair) *events.AuditNote {
	return &events.AuditNote{Kind: events.AuditDecision, Op: opConflictResolver, Actor: resolverActor,
		Pairs: []events.AuditPair{{MemoryID: judged.MemoryID, PeerID: jp.Peer, Action: string(jp.Action), Verdict: string(jp.Verdict),
			Confidence: jp.Confidence, Cosine: jp.Cosine}}}
}

// pairRows are the copies an action writes: only the rows it changes. The judged
// row's copy no longer owes a judgement: this one is its.
func pairRows(a pairAction, j, p *memrow.Row) []command.WorkerRow {
	jc, pc := command.CopyOf(j), command.CopyOf(p)
	// The copies are the resolver's act, never the earlier writers' (postgres-authority.md, Audit).
	jc.Actor, pc.Actor = resolverActor, resolverActor
	var op string
	switch a {
	case actRetire:
		op = opAutoSupersede
		pc.Status, pc.SupersededBy = memrow.StatusSuperseded, j.MemoryID
		pc.ConflictWith = without(pc.ConflictWith, j.MemoryID)
		// The winner's flag against the row it retired goes, as a clear removes it.
		unflag(jc, p.MemoryID)
	case actFlag:
		op = opConflictFlag
		for _, c := range []struct {
			row   *memrow.Row
			other string
		}{{jc, p.MemoryID}, {pc, j.MemoryID}} {
			c.row.Status = memrow.StatusConflicted
			c.row.ConflictWith = command.AppendOnce(c.row.ConflictWith, c.other)
		}
	case actClear:
		op = opConflictClear
		unflag(jc, p.MemoryID)
		unflag(pc, j.MemoryID)
	default:
		return nil
	}
	var out []command.WorkerRow
	for _, c := range []struct{ head, row *memrow.Row }{{j, jc}, {p, pc}} {
		if c.row == jc {
			jc.JudgementOwed = false
		}
		if command.Unchanged(c.head, c.row) {
			continue
		}
		out = append(out, command.WorkerRow{Op: op, Event: events.TypeStatusChanged, Row: c.row, ReadVersion: c.head.Version, ReadSeq: c.head.Seq})
	}
	// A copy that only drops the judged row's mark is no action of its own.
	if len(out) == 1 && out[0].Row == jc && onlyMarkDropped(j, jc) {
		return nil
	}
	return out
}

// unflag removes other from a row's flags; a conflicted row left with none is active
// again.
func unflag(r *memrow.Row, other string) {
	r.ConflictWith = without(r.ConflictWith, other)
	if len(r.ConflictWith) == 0 && r.Status == memrow.StatusConflicted {
		r.Status = memrow.StatusActive
	}
}

func without(list []string, v string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(x string) bool { return x == v })
}

// onlyMarkDropped reports whether the copy differs from its head by the mark alone.
func onlyMarkDropped(head, c *memrow.Row) bool {
	h := *head
	h.JudgementOwed = false
	return command.Unchanged(&h, c)
}

// transientStore reports whether a write failed for a reason asking later may cure:
// a lock held past its wait, a Postgres that went away.
func transientStore(err error) bool {
	return pg.Conflict(err) || errors.Is(err, context.DeadlineExceeded) || pg.Unavailable(err)
}
