package command

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/snapshot"
)

// namespace.restore's conversation record: a snapshot's kept turns are written as
// memory.observe keeps turns (keepTurns: sealed under fresh keys, a
// memory.turns_observed record on the topic, the verbatim chunks cut again), one
// conversation at a time, each keeping its turn id, so a restore run again skips the
// turns it wrote. Each turn links again to the memories drawn from it (a link of no
// version, as the restored memories are written at new versions), and each session's
// newest digest is kept again over the restored turns. Turns of a user an erasure
// removed from the snapshot's namespace or this one since are left out, as the
// erased memories are. Restored turns are kept as imported: a later
// observe.crystallize does not extract them again.
//
// The fence against an erasure is the memory restore's: the read of the erasures is
// made again inside each write's transaction, once it holds the namespace's generation
// lock (the lock an erasure's step 1 holds while it removes rows), and an erasure of
// the user found there refuses the restore with the memory restore's 409 (a retry
// leaves the user out). A restored turn may be numbered after turns the session held
// already, so a digest is kept ending at the restored turn its window ended at (by
// turn id), not at the snapshot's index.

// restoreTurnBytes bounds the text of one conversation's turns kept in one record, far
// under the broker's record limit (maxRequestRecordBytes) once sealed and encoded.
const restoreTurnBytes = 256 << 10

// conversationRestore gathers a snapshot's consecutive turns of one conversation and
// keeps them.
type conversationRestore struct {
	s              *Service
	p              auth.Principal
	target, source string
	ans            *RestoreAnswer
	group          []snapshot.Turn
	bytes          int
	erased         map[string]bool // users erased since; nil until read
	namespaceGone  bool            // the source or the target namespace was erased since
	// turnAt names the turn each snapshot position (user, session, message index) is
	// now in the namespace, for the digests that follow the turns.
	turnAt map[turnPosition]string
}

// turnPosition is a turn's place in the snapshot's numbering.
type turnPosition struct {
	userID, sessionID string
	index             int
}

func (s *Service) newConversationRestore(p auth.Principal, target, source string, ans *RestoreAnswer) *conversationRestore {
	return &conversationRestore{s: s, p: p, target: target, source: source, ans: ans, turnAt: map[turnPosition]string{}}
}

// checkRestoredRecord holds a snapshot's turn or digest to what keeping it needs.
func checkRestoredRecord(line snapshot.Line) error {
	if d := line.Digest; d != nil {
		// A digest names no agent: its session is one user's.
		if err := validIdentity(memrow.Identity{Org: "o", Namespace: "n", Agent: memrow.DefaultIdentity, UserID: d.UserID, SessionID: d.SessionID}); err != nil {
			return err
		}
		if d.WindowEnd < 0 || d.Turns < 1 || d.Text == "" {
			return errors.New("a digest covers at least one turn and has text")
		}
		return nil
	}
	t := line.Turn
	if _, err := uuid.Parse(t.TurnID); err != nil {
		return errors.New("turn_id is not a UUID")
	}
	if err := validIdentity(memrow.Identity{Org: "o", Namespace: "n", Agent: t.Agent, UserID: t.UserID, SessionID: t.SessionID}); err != nil {
		return err
	}
	for _, id := range t.MemoryIDs {
		if _, err := uuid.Parse(id); err != nil {
			return errors.New("memory_ids holds an id that is not a UUID")
		}
	}
	return checkTurns([]observedTurn{{Role: t.Role, Content: t.Text, Speaker: t.Speaker}})
}

// add takes the next turn or digest of the payload.
func (c *conversationRestore) add(ctx context.Context, line snapshot.Line) error {
	if d := line.Digest; d != nil {
		if err := c.flush(ctx); err != nil {
			return err
		}
		return c.keepDigest(ctx, d)
	}
	t := line.Turn
	if len(c.group) > 0 {
		first := c.group[0]
		if first.Agent != t.Agent || first.UserID != t.UserID || first.SessionID != t.SessionID ||
			len(c.group) == maxObservedTurns || c.bytes+len(t.Text) > restoreTurnBytes {
			if err := c.flush(ctx); err != nil {
				return err
			}
		}
	}
	c.group = append(c.group, *t)
	c.bytes += len(t.Text)
	return nil
}

// skipped reports whether an erasure since removed the user's record.
func (c *conversationRestore) skipped(ctx context.Context, userID string) (bool, error) {
	if c.erased == nil {
		users, gone, err := c.s.erasedSince(ctx, c.s.pool, c.p.Org, []string{c.source, c.target})
		if err != nil {
			return false, httperr.Store("reading the erasures", err)
		}
		c.erased, c.namespaceGone = users, gone
	}
	return c.namespaceGone || c.erased[userID], nil
}

// flush keeps the gathered turns the namespace does not hold yet.
func (c *conversationRestore) flush(ctx context.Context) error {
	group := c.group
	c.group, c.bytes = nil, 0
	if len(group) == 0 {
		return nil
	}
	first := group[0]
	if skip, err := c.skipped(ctx, first.UserID); err != nil || skip {
		if skip {
			c.ans.Counts.TurnsErasedSkipped += int64(len(group))
		}
		return err
	}
	ids := make([]string, len(group))
	var memoryIDs []string
	for i, t := range group {
		ids[i] = t.TurnID
		memoryIDs = append(memoryIDs, t.MemoryIDs...)
	}
	held, err := evidence.Held(ctx, c.s.pool, c.p.Org, c.target, ids)
	if err != nil {
		return httperr.Store("reading the namespace's turns", err)
	}
	erasedMemories, err := c.s.erasedIn(ctx, c.s.pool, c.p.Org, []string{c.source, c.target}, memoryIDs)
	if err != nil {
		return httperr.Store("reading the deletion evidence", err)
	}
	var turns []observedTurn
	drawn := map[string][]string{}
	for _, t := range group {
		c.turnAt[turnPosition{t.UserID, t.SessionID, t.MessageIndex}] = t.TurnID
		if held[t.TurnID] {
			c.ans.Counts.TurnsUnchanged++
			continue
		}
		at := t.OccurredAt
		turns = append(turns, observedTurn{Role: t.Role, Content: t.Text, Speaker: t.Speaker, At: &at, keepID: t.TurnID})
		for _, m := range t.MemoryIDs {
			if !erasedMemories[m] {
				drawn[t.TurnID] = append(drawn[t.TurnID], m)
			}
		}
	}
	if len(turns) == 0 {
		return nil
	}
	id := memrow.Identity{Org: c.p.Org, Namespace: c.target, Agent: first.Agent, UserID: first.UserID, SessionID: first.SessionID}
	links := func(rows []evidence.Turn) []evidence.Link {
		var out []evidence.Link
		for _, r := range rows {
			for _, m := range drawn[r.TurnID] {
				out = append(out, evidence.Link{Org: r.Org, Namespace: r.Namespace, MemoryID: m, TurnID: r.TurnID, UserID: r.UserID, Seq: r.Seq})
			}
		}
		return out
	}
	tb, err := c.s.sealTurns(ctx, id, turns, evidence.SourceImport)
	if err != nil {
		return err
	}
	tb.fence = c.fence(first.UserID)
	if err := c.s.commitTurns(ctx, tb, links); err != nil {
		return err
	}
	c.ans.Counts.Turns += int64(len(turns))
	return nil
}

// fence refuses a write of userID's record, in its transaction under the namespace's
// generation lock, when an erasure of the user or of either namespace was requested
// since (the ledger read again, not the one read before the write).
func (c *conversationRestore) fence(userID string) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		users, gone, err := c.s.erasedSince(ctx, tx, c.p.Org, []string{c.source, c.target})
		if err != nil {
			return err
		}
		if gone || users[userID] {
			return erasedWhileRestoring(c.ans.Batches)
		}
		return nil
	}
}

// keepDigest keeps a session's digest over the restored turns, ending at the turn
// its window ended at in the snapshot; one whose last turn the namespace does not hold
// is not kept.
func (c *conversationRestore) keepDigest(ctx context.Context, d *snapshot.Digest) error {
	if skip, err := c.skipped(ctx, d.UserID); err != nil || skip {
		return err
	}
	last, ok := c.turnAt[turnPosition{d.UserID, d.SessionID, d.WindowEnd}]
	if !ok {
		return nil // its last turn is not in the snapshot
	}
	dg := evidence.Digest{Org: c.p.Org, Namespace: c.target, UserID: d.UserID, SessionID: d.SessionID,
		LastTurnID: last, Turns: d.Turns, Model: d.Model}
	if err := c.s.sealDigest(&dg, d.Text); err != nil {
		return err
	}
	kept := false
	err := pg.InTx(ctx, c.s.pool, func(tx pgx.Tx) error {
		if _, err := generations.Lock(ctx, tx, c.p.Org, c.target); errors.Is(err, generations.ErrUnwritten) {
			return nil // no turn of it is held: nothing to digest
		} else if err != nil {
			return fmt.Errorf("lock the namespace's generation: %w", err)
		}
		if err := c.fence(d.UserID)(ctx, tx); err != nil {
			return err
		}
		var err error
		kept, err = evidence.InsertDigest(ctx, tx, dg)
		return err
	})
	var he *httperr.Error
	switch {
	case errors.As(err, &he):
		return he
	case err != nil:
		return httperr.Store("keeping a session's digest", fmt.Errorf("session %s: %w", d.SessionID, err))
	}
	if kept {
		c.ans.Counts.Digests++
	}
	return nil
}
