package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/rowseal"
)

// A claim commits asynchronously (synchronous_commit off for its transaction): it
// needs no WAL flush of its own. A request is acknowledged only after its write's
// commit, which is synchronous and whose commit record follows the claim's in the
// WAL, so that commit's flush (and its wait for a synchronous standby, which receives
// the WAL in order) makes the claim durable too. A claim a crash loses belonged to a
// request nobody acknowledged; its retry claims the key afresh. A request that
// commits nothing releases its key anyway. docs/architecture.md, "Idempotency-Key".

// claim takes the key, or answers from it: none or expired → run; another digest →
// 409; erased (an erasure removed something it wrote) → 404 for the whole request;
// done → the stored answer; running or committed under a live lease → 503; committed
// with the lease over → the committed revisions; running with the lease over → run
// under the next token. A key no row holds is taken in one statement (claimNew);
// one a row holds is read, and taken over or answered, under the row's lock.
func (s *Store) claim(ctx context.Context, org string, keyHash []byte, op string, digest []byte) (*Hold, []byte, error) {
	key, storedKey, err := kek.NewKey(s.opts.Keys)
	if err != nil {
		return nil, nil, httperr.Store("claiming the Idempotency-Key", err)
	}
	c := claiming{org: org, keyHash: keyHash, op: op, digest: digest, key: key, storedKey: storedKey}
	hold, err := s.claimNew(ctx, c)
	var replay []byte
	if err == nil && hold == nil {
		hold, replay, err = s.claimHeld(ctx, c)
	}
	if err != nil {
		var he *httperr.Error
		if errors.As(err, &he) {
			return nil, nil, he
		}
		if lockTimedOut(err) {
			return nil, nil, inProgress()
		}
		return nil, nil, httperr.Store("claiming the Idempotency-Key", err)
	}
	return hold, replay, nil
}

// claiming is what a claim takes: the key's row, the request's digest, and the data
// key its answer is sealed under (key; storedKey as the row keeps it).
type claiming struct {
	org            string
	keyHash        []byte
	op             string
	digest         []byte
	key, storedKey []byte
}

func (c claiming) hold(token int64) *Hold {
	return &Hold{org: c.org, keyHash: c.keyHash, token: token, key: c.key}
}

// claimNew takes a key no row holds, in one statement (its own transaction, one round
// trip). nil: a row holds the key.
func (s *Store) claimNew(ctx context.Context, c claiming) (*Hold, error) {
	var token int64
	err := s.pool.QueryRow(ctx, claimSQL, s.claimArgs(c)...).Scan(&token)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return c.hold(token), nil
}

// claimArgs are claimSQL's arguments for c.
func (s *Store) claimArgs(c claiming) []any {
	return []any{c.org, c.keyHash, c.op, c.digest, s.opts.Lease.String(), keep.String(), c.storedKey,
		fmt.Sprintf("%dms", lockWait.Milliseconds())}
}

// claimHeld takes or answers from a key a row holds, under the row's lock. The insert
// runs again: the row may have been released since claimNew.
func (s *Store) claimHeld(ctx context.Context, c claiming) (*Hold, []byte, error) {
	lease := s.opts.Lease
	var hold *Hold
	var replay []byte
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var token int64
		err := tx.QueryRow(ctx, claimSQL, s.claimArgs(c)...).Scan(&token)
		if err == nil {
			hold = c.hold(token)
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var storedDigest []byte
		var row storedRow
		var state string
		var leaseLive, expired bool
		err = tx.QueryRow(ctx, lockSQL, c.org, c.keyHash).Scan(&storedDigest, &state, &leaseLive, &expired, &token,
			&row.key, &row.answer, &row.answerSealed, &row.revisions, &row.revisionsSealed)
		if err != nil {
			return err
		}
		takeOver := func() error {
			err := tx.QueryRow(ctx, takeOverSQL, c.org, c.keyHash, c.op, c.digest, lease.String(), expired, keep.String(), c.storedKey).Scan(&token)
			hold = c.hold(token)
			return err
		}
		switch {
		case expired:
			return takeOver()
		case string(storedDigest) != string(c.digest):
			return httperr.New(http.StatusConflict, CodeConflict, "the Idempotency-Key was used for another request")
		case state == stateErased:
			return httperr.NotFound("what this request wrote was erased since")
		case state == stateDone:
			replay, err = s.opened(row.key, row.answer, row.answerSealed, rowseal.LabelAnswer)
			return err
		case leaseLive:
			return inProgress()
		case state == stateCommitted && s.opts.ReplayCommitted != nil:
			revisions, err := s.opened(row.key, row.revisions, row.revisionsSealed, rowseal.LabelRevisions)
			if err != nil {
				return err
			}
			replay, err = s.opts.ReplayCommitted(revisions)
			return err
		default: // running, its lease over: its request died before committing
			return takeOver()
		}
	})
	return hold, replay, err
}
