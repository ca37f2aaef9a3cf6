package command

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/command/extraction"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/learnings"
	"github.com/loomplane/loom/internal/pg"
)

// The learnings queue's side of memory.set_from_messages' loom.bulk_write: a rule
// about the agent itself (about="agent") is filed as a pending candidate with the
// user's quote that supports it (internal/learnings), in the facts' commit, never as a
// memory. Each text is sealed under a data key of its own, kept on its row alone.

// sealLearnings seals a write's rules and their quotes (the messages that state them)
// as the candidates its commit files; none on a dry run.
func (s *Service) sealLearnings(fw extraction.Write) ([]learnings.Candidate, error) {
	if fw.DryRun || len(fw.Learnings) == 0 {
		return nil, nil
	}
	id := fw.Identity
	out := make([]learnings.Candidate, len(fw.Learnings))
	for i, l := range fw.Learnings {
		rule, err := s.sealLearningText(id.Agent, "", l.Rule)
		if err != nil {
			return nil, err
		}
		quote, err := s.sealLearningText(id.Agent, id.SessionID, l.Quote)
		if err != nil {
			return nil, err
		}
		out[i] = learnings.Candidate{Org: id.Org, Namespace: id.Namespace, CandidateID: uuid.NewString(), Agent: id.Agent,
			UserID: id.UserID, SessionID: id.SessionID, MessageIndex: l.MessageIndex, Rule: rule, Quote: quote}
	}
	return out, nil
}

// sealLearningText seals one text, with its agent and session, under a fresh data key.
func (s *Service) sealLearningText(agent, session, text string) (learnings.Sealed, error) {
	key, err := events.NewDataKey()
	if err != nil {
		return learnings.Sealed{}, err
	}
	stored, err := s.storedKey(key)
	if err != nil {
		return learnings.Sealed{}, err
	}
	return learnings.Seal(key, stored, agent, session, text)
}

// fileLearningsAlone files the learnings of a write that has no facts to commit.
func (s *Service) fileLearningsAlone(ctx context.Context, w *factWriter, filed []learnings.Candidate) (*extraction.Written, error) {
	out := &extraction.Written{Outcomes: map[int]extraction.Fact{}, Superseded: []string{}}
	if len(filed) == 0 {
		return out, nil
	}
	if err := s.commitLearnings(ctx, w, filed); err != nil {
		return nil, err
	}
	out.LearningIDs, out.Committed = candidateIDs(filed), true
	return out, nil
}

// commitLearnings files learnings in a commit of their own, with the writer's
// in-commit work (a deferred request's done mark), when no fact commit carries them.
func (s *Service) commitLearnings(ctx context.Context, w *factWriter, filed []learnings.Candidate) error {
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if w.inCommit != nil {
			if err := w.inCommit(ctx, tx); err != nil {
				return err
			}
		}
		return learnings.Insert(ctx, tx, filed)
	})
	if err != nil {
		return httperr.Store("filing the rules about the agent", err)
	}
	return nil
}

// candidateIDs are the filed candidates' ids, in order.
func candidateIDs(filed []learnings.Candidate) []string {
	out := make([]string, len(filed))
	for i, c := range filed {
		out[i] = c.CandidateID
	}
	return out
}
