package command

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/learnings"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/snapshot"
)

// namespace.restore's learnings: each candidate of the snapshot's learnings queue is
// filed again under its own id, pending as it was, with the supporters of users no
// erasure removed since (a candidate none of whose supporters is left is not filed),
// each text sealed under a fresh data key as extraction seals it. A restore run again
// files nothing new: a candidate or supporter the namespace holds is left as it is.
// The fence is the turns': the erasures are read again under the namespace's
// generation lock, and an erasure of a supporter's user found there refuses the
// restore with 409.

// checkRestoredLearning holds a snapshot's learning to what filing it needs.
func checkRestoredLearning(l *snapshot.Learning) error {
	if _, err := uuid.Parse(l.CandidateID); err != nil {
		return errors.New("candidate_id is not a UUID")
	}
	if l.Source != learnings.SourceAssistantTurn || l.Status != "pending" {
		return fmt.Errorf("a learning's source is %s and its status pending, not %q and %q", learnings.SourceAssistantTurn, l.Source, l.Status)
	}
	if l.Rule == "" || len(l.Supporters) == 0 {
		return errors.New("a learning has a rule and at least one supporter")
	}
	for _, s := range l.Supporters {
		if err := validIdentity(memrow.Identity{Org: "o", Namespace: "n", Agent: l.Agent, UserID: s.UserID, SessionID: s.SessionID}); err != nil {
			return err
		}
		if s.MessageIndex < 0 || s.Quote == "" {
			return errors.New("a supporter has a message index from 0 and a quote")
		}
	}
	return nil
}

// addLearning files one snapshot learning in the target namespace.
func (c *conversationRestore) addLearning(ctx context.Context, l *snapshot.Learning) error {
	k := learnings.Kept{Org: c.p.Org, Namespace: c.target, CandidateID: l.CandidateID, Agent: l.Agent, Source: l.Source,
		Status: l.Status, CreatedAt: l.CreatedAt}
	var users []string
	for _, s := range l.Supporters {
		skip, err := c.skipped(ctx, s.UserID)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		quote, err := c.s.sealLearningText(l.Agent, s.SessionID, s.Quote)
		if err != nil {
			return err
		}
		k.Supporters = append(k.Supporters, learnings.KeptSupporter{UserID: s.UserID, SessionID: s.SessionID,
			MessageIndex: s.MessageIndex, CreatedAt: s.CreatedAt, Quote: quote})
		users = append(users, s.UserID)
	}
	if len(k.Supporters) == 0 {
		return nil
	}
	var err error
	if k.Rule, err = c.s.sealLearningText(l.Agent, "", l.Rule); err != nil {
		return err
	}
	added := false
	err = pg.InTx(ctx, c.s.pool, func(tx pgx.Tx) error {
		var err error
		if added, err = learnings.Restore(ctx, tx, k); err != nil {
			return err
		}
		// Restore holds the generation lock now: an erasure since is seen or fenced out.
		for _, u := range users {
			if err := c.fence(u)(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	})
	var he *httperr.Error
	switch {
	case errors.As(err, &he):
		return he
	case err != nil:
		return httperr.Store("filing a learning again", fmt.Errorf("candidate %s: %w", l.CandidateID, err))
	}
	if added {
		c.ans.Counts.Learnings++
	}
	return nil
}
