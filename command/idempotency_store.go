package command

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomplane/loom/internal/erasure"
)

// The statements of loom.idempotency: claim (idempotency.go) takes, reads and takes
// over a key in one transaction with these; the commit marks it committed.

func (s *Service) storeAnswer(ctx context.Context, hold *idemHold, answer []byte) error {
	if hold == nil {
		return nil
	}
	_, err := s.pool.Exec(context.WithoutCancel(ctx), `UPDATE loom.idempotency SET state = 'done', answer = $4
		WHERE org = $1 AND key_hash = $2 AND token = $3`, hold.org, hold.keyHash, hold.token, answer)
	return err
}

func (s *Service) release(ctx context.Context, hold *idemHold) {
	if hold == nil {
		return
	}
	if _, err := s.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM loom.idempotency WHERE org = $1 AND key_hash = $2 AND token = $3`,
		hold.org, hold.keyHash, hold.token); err != nil {
		s.log.Warn("idempotency: cannot release a claim; it lapses with its lease", "err", err)
	}
}

// queueFenceErasedAnswers queues the fence of the answers naming a memory an erasure
// removed (args as erasure.ScopeParams names them): a new token, so a request still
// holding the key stores no answer, and a retry answers 404 for the whole request.
// fenced holds how many once the batch is sent.
func queueFenceErasedAnswers(b *pgx.Batch, args []any, fenced *int64) {
	b.Queue(erasure.ScopeParams+` UPDATE loom.idempotency t SET state = 'erased', revisions = NULL, answer = NULL, token = t.token + 1
		FROM p WHERE `+pgScope("loom.idempotency"), args...).Exec(func(tag pgconn.CommandTag) error {
		*fenced = tag.RowsAffected()
		return nil
	})
}

// sweepIdempotency deletes keys past their 24 hours.
func (s *Service) sweepIdempotency(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM loom.idempotency WHERE ctid IN (
		SELECT ctid FROM loom.idempotency WHERE expires_at < now() LIMIT 5000)`)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

const (
	// idemInsertSQL takes a key no row holds ($1 org, $2 key hash, $3 op, $4 request
	// digest, $5 lease, $6 how long it is kept), returning its token.
	idemInsertSQL = `INSERT INTO loom.idempotency (org, key_hash, op, request_digest, state, lease_until, token, expires_at)
			VALUES ($1, $2, $3, $4, 'running', now() + $5::interval, 1, now() + $6::interval)
			ON CONFLICT DO NOTHING RETURNING token`
	// idemLockSQL locks and reads a key's row.
	idemLockSQL = `SELECT request_digest, state, lease_until > now(), expires_at <= now(), token, answer, revisions
			FROM loom.idempotency WHERE org = $1 AND key_hash = $2 FOR UPDATE`
	// idemTakeOverSQL runs a key's row under the next token ($6: it expired, and
	// starts afresh), returning the token.
	idemTakeOverSQL = `UPDATE loom.idempotency SET state = 'running', token = token + 1, op = $3, request_digest = $4,
				lease_until = now() + $5::interval, revisions = NULL, answer = NULL,
				created_at = CASE WHEN $6 THEN now() ELSE created_at END,
				expires_at = CASE WHEN $6 THEN now() + $7::interval ELSE expires_at END
				WHERE org = $1 AND key_hash = $2 RETURNING token`
	// idemCommittedSQL marks a key committed with its revisions ($4), under its
	// request's token ($3) only.
	idemCommittedSQL = `UPDATE loom.idempotency SET state = 'committed', revisions = $4
		WHERE org = $1 AND key_hash = $2 AND token = $3`
)
