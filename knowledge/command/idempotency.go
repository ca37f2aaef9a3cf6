package command

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/pg"
)

// Idempotency-Key on the knowledge writes: the same table and the same answers as
// memory's writes (command/idempotency.go; the knowledge plane's write side may not
// import memory's, so the few statements are repeated here). A key is a row of
// loom.idempotency keyed by the org and a hash of the token, the operation and the
// key; the request holds it under a lease and a token. A write that commits stores
// its answer in the commit's own transaction, under that token only, so a retry
// replays exactly what committed, and a request a retry took over commits nothing.
//
// A key whose request is still running answers 503 IDEMPOTENT_IN_PROGRESS; one used
// for another request (another method, URL or body) 409 IDEMPOTENT_CONFLICT. Keys
// are kept 24 hours.

// Codes of the idempotency table, as memory's writes answer them.
const (
	CodeIdempotentConflict   = "IDEMPOTENT_CONFLICT"
	CodeIdempotentInProgress = "IDEMPOTENT_IN_PROGRESS"
	CodeIdempotentTakenOver  = "IDEMPOTENT_TAKEN_OVER"
)

const (
	idemLease     = time.Minute
	idemKeep      = 24 * time.Hour
	maxIdemKeyLen = 255
)

var errIdemTakenOver = errors.New("a retry took over this request's idempotency key")

// IdemKey is what an Idempotency-Key covers: the key, the token that sent it, the
// operation, and the request (method, URL and body) a retry must repeat.
type IdemKey struct {
	Key     string
	P       auth.Principal
	Op      string
	Request string
}

// idemHold is a request's hold on its key (nil: the request has none).
type idemHold struct {
	org     string
	keyHash []byte
	token   int64
}

// Reply is what a write under a key answers: its answer's JSON, and whether it is a
// replay of an earlier run's.
type Reply struct {
	Body   []byte
	Replay bool
}

// Idempotent runs a write under its Idempotency-Key (run without one when the
// request has none): a replay answers the stored answer; otherwise run runs with the
// hold its commit marks.
func (s *Service) Idempotent(ctx context.Context, k IdemKey, run func(hold *idemHold) (any, error)) (Reply, error) {
	if k.Key == "" {
		ans, err := run(nil)
		if err != nil {
			return Reply{}, err
		}
		body, err := json.Marshal(ans)
		return Reply{Body: body}, err
	}
	if len(k.Key) > maxIdemKeyLen {
		return Reply{}, httperr.Validation("Idempotency-Key", "the Idempotency-Key header is longer than 255 characters")
	}
	if !utf8.ValidString(k.Key) || strings.ContainsRune(k.Key, 0) {
		return Reply{}, httperr.Validation("Idempotency-Key", "the Idempotency-Key holds text Postgres cannot store")
	}
	keyHash := sha256.Sum256([]byte("v3\x00" + k.P.Org + "\x00" + k.P.TokenID + "\x00" + k.Op + "\x00" + k.Key))
	digest := sha256.Sum256([]byte(k.Request))
	hold, replay, err := s.claimKey(ctx, k.P.Org, keyHash[:], k.Op, digest[:])
	if err != nil {
		return Reply{}, err
	}
	if replay != nil {
		return Reply{Body: replay, Replay: true}, nil
	}
	ans, err := run(hold)
	if err != nil {
		if !errors.Is(err, pg.ErrOutcomeUnknown) {
			s.releaseKey(ctx, hold)
		}
		return Reply{}, err
	}
	body, err := json.Marshal(ans)
	if err != nil {
		return Reply{}, err
	}
	// A write that committed stored its answer in its transaction; one that committed
	// nothing (an upsert of the head's own content) lets a retry run again.
	if w, ok := ans.(*Written); ok && w.Unchanged {
		s.releaseKey(ctx, hold)
	}
	return Reply{Body: body}, nil
}

// claimKey takes the key, or answers from it: none or expired → run; another digest
// → 409; done → the stored answer; running under a live lease → 503; running with
// its lease over → run under the next token.
func (s *Service) claimKey(ctx context.Context, org string, keyHash []byte, op string, digest []byte) (*idemHold, []byte, error) {
	var hold *idemHold
	var replay []byte
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var token int64
		err := tx.QueryRow(ctx, `INSERT INTO loom.idempotency (org, key_hash, op, request_digest, state, lease_until, token, expires_at)
			VALUES ($1, $2, $3, $4, 'running', now() + $5::interval, 1, now() + $6::interval)
			ON CONFLICT DO NOTHING RETURNING token`, org, keyHash, op, digest, idemLease.String(), idemKeep.String()).Scan(&token)
		if err == nil {
			hold = &idemHold{org: org, keyHash: keyHash, token: token}
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var storedDigest, answer []byte
		var state string
		var leaseLive, expired bool
		if err := tx.QueryRow(ctx, `SELECT request_digest, state, lease_until > now(), expires_at <= now(), token, answer
			FROM loom.idempotency WHERE org = $1 AND key_hash = $2 FOR UPDATE`, org, keyHash).
			Scan(&storedDigest, &state, &leaseLive, &expired, &token, &answer); err != nil {
			return err
		}
		switch {
		case expired || (state == "running" && !leaseLive):
			err := tx.QueryRow(ctx, `UPDATE loom.idempotency SET state = 'running', token = token + 1, op = $3, request_digest = $4,
				lease_until = now() + $5::interval, revisions = NULL, answer = NULL,
				created_at = CASE WHEN $6 THEN now() ELSE created_at END,
				expires_at = CASE WHEN $6 THEN now() + $7::interval ELSE expires_at END
				WHERE org = $1 AND key_hash = $2 RETURNING token`, org, keyHash, op, digest, idemLease.String(), expired, idemKeep.String()).Scan(&token)
			hold = &idemHold{org: org, keyHash: keyHash, token: token}
			return err
		case string(storedDigest) != string(digest):
			return httperr.New(http.StatusConflict, CodeIdempotentConflict, "the Idempotency-Key was used for another request")
		case state == "erased":
			return httperr.NotFound("what this request wrote was erased since")
		case state == "done":
			replay = answer
			return nil
		default:
			return httperr.Unavailable(CodeIdempotentInProgress, "a request with this Idempotency-Key is still running; retry", nil)
		}
	})
	if err != nil {
		var he *httperr.Error
		if errors.As(err, &he) {
			return nil, nil, he
		}
		return nil, nil, httperr.Store("claiming the Idempotency-Key", err)
	}
	return hold, replay, nil
}

// mark stores a write's answer in its commit's transaction, under the request's token
// only: a request a retry took over commits nothing.
func (h *idemHold) mark(ctx context.Context, tx pgx.Tx, answer any) error {
	if h == nil {
		return nil
	}
	raw, err := json.Marshal(answer)
	if err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `UPDATE loom.idempotency SET state = 'done', answer = $4
		WHERE org = $1 AND key_hash = $2 AND token = $3`, h.org, h.keyHash, h.token, raw)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errIdemTakenOver
	}
	return nil
}

// guardOf is the commit guard that marks h with the answer answer builds from what
// the commit writes (nil without a key).
func (h *idemHold) guardOf(answer func([]Written) any) guard {
	if h == nil {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, w []Written) error { return h.mark(ctx, tx, answer(w)) }
}

func (s *Service) releaseKey(ctx context.Context, hold *idemHold) {
	if hold == nil {
		return
	}
	if _, err := s.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM loom.idempotency WHERE org = $1 AND key_hash = $2 AND token = $3`,
		hold.org, hold.keyHash, hold.token); err != nil {
		s.log.Warn("idempotency: cannot release a claim; it lapses with its lease", "err", err)
	}
}

// takenOver is the answer of a request whose key a retry took over.
func takenOver() *httperr.Error {
	return httperr.Unavailable(CodeIdempotentTakenOver, "a retry with this Idempotency-Key took the request over; its answer is the retry's", nil)
}
