package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/rowseal"
)

// The statements of loom.idempotency: claim (idempotency.go) takes, reads and takes
// over a key in one transaction with the first three; a writer's commit marks its key
// in its own transaction; the erasure saga fences the answers naming what it removed;
// the expiry pass sweeps.

const (
	// claimSQL takes a key no row holds ($1 org, $2 key hash, $3 op, $4 request digest,
	// $5 lease, $6 how long it is kept, $7 the claim's data key as stored), returning its
	// token, and sets its transaction's bounded wait for a row lock ($8) and
	// asynchronous commit (claim.go says why that is safe). Sent alone, it is its own
	// transaction; sent first in one, its settings hold for the rest of it.
	claimSQL = `WITH settings AS (SELECT set_config('lock_timeout', $8, true), set_config('synchronous_commit', 'off', true))
			INSERT INTO loom.idempotency (org, key_hash, op, request_digest, state, lease_until, token, expires_at, data_key)
			SELECT $1, $2, $3, $4, 'running', now() + $5::interval, 1, now() + $6::interval, $7 FROM settings
			ON CONFLICT DO NOTHING RETURNING token`
	// lockSQL locks and reads a key's row: its answer and revisions sealed under its
	// data key, or (stored before migration 156) plain.
	lockSQL = `SELECT request_digest, state, lease_until > now(), expires_at <= now(), token, data_key,
				coalesce(sealed_answer, convert_to(answer::text, 'UTF8')), sealed_answer IS NOT NULL,
				coalesce(sealed_revisions, convert_to(revisions::text, 'UTF8')), sealed_revisions IS NOT NULL
			FROM loom.idempotency WHERE org = $1 AND key_hash = $2 FOR UPDATE`
	// takeOverSQL runs a key's row under the next token ($6: it expired, and starts
	// afresh) and a new data key ($8), returning the token.
	takeOverSQL = `UPDATE loom.idempotency SET state = 'running', token = token + 1, op = $3, request_digest = $4,
				lease_until = now() + $5::interval, revisions = NULL, answer = NULL,
				sealed_revisions = NULL, sealed_answer = NULL, names = NULL, data_key = $8,
				created_at = CASE WHEN $6 THEN now() ELSE created_at END,
				expires_at = CASE WHEN $6 THEN now() + $7::interval ELSE expires_at END
				WHERE org = $1 AND key_hash = $2 RETURNING token`
	// doneSQL stores a key's answer ($4, sealed) and the ids it names ($5) under its
	// request's token ($3) only.
	doneSQL = `UPDATE loom.idempotency SET state = 'done', sealed_answer = $4, names = concat_ws(' ', names, $5::text)
		WHERE org = $1 AND key_hash = $2 AND token = $3`
	// lockHeldSQL locks a key's row while its request holds it ($3, the request's token).
	lockHeldSQL = `SELECT true FROM loom.idempotency WHERE org = $1 AND key_hash = $2 AND token = $3 FOR UPDATE`
	// doneAsyncSQL is doneSQL committed asynchronously, sent alone (storeAnswer).
	doneAsyncSQL = `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
		UPDATE loom.idempotency SET state = 'done', sealed_answer = $4, names = concat_ws(' ', names, $5::text)
		FROM async WHERE org = $1 AND key_hash = $2 AND token = $3`
	// committedSQL marks a key committed with its revisions ($4, sealed) and the ids
	// they name ($5), under its request's token ($3) only.
	committedSQL = `UPDATE loom.idempotency SET state = 'committed', sealed_revisions = $4, names = concat_ws(' ', names, $5::text)
		WHERE org = $1 AND key_hash = $2 AND token = $3`
)

// ids finds the memory and document ids a stored answer or revisions name: what the
// erasure's fence matches (internal/erasure's registry), kept beside the sealed text.
var ids = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// namesOf is the ids raw names, space-separated, each once.
func namesOf(raw []byte) string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids.FindAll(raw, -1) {
		if !seen[string(id)] {
			seen[string(id)] = true
			out = append(out, string(id))
		}
	}
	return strings.Join(out, " ")
}

// QueueLock queues, in the first batch of a commit's transaction, the lock of the key's
// row under the request's token: held is false once the batch is sent when a retry
// took the key over (the commit then answers ErrTakenOver and writes nothing). A held
// row's token cannot change until the commit ends (a take-over, an erasure's fence and
// the sweep all lock the row first), so QueueCommitted's mark, later in the same
// transaction, cannot miss. A nil hold queues nothing and holds.
func QueueLock(b *pgx.Batch, hold *Hold, held *bool) {
	*held = hold == nil
	if hold == nil {
		return
	}
	b.Queue(lockHeldSQL, hold.org, hold.keyHash, hold.token).QueryRow(func(row pgx.Row) error {
		err := row.Scan(held)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
}

// QueueCommitted queues, in the commit's last batch (with its COMMIT), the mark of the
// key committed with the revisions (JSON) a replay answers until the answer is stored.
// The commit's first batch locked the row under the request's token (QueueLock). A nil
// hold queues nothing.
func QueueCommitted(b *pgx.Batch, hold *Hold, revisions any) error {
	if hold == nil {
		return nil
	}
	args, err := hold.markArgs(rowseal.LabelRevisions, revisions)
	if err != nil {
		return err
	}
	b.Queue(committedSQL, args...)
	hold.committed, hold.stored = true, false
	return nil
}

// QueueDone queues, in the commit's last batch (with its COMMIT), the key's answer
// stored, done: a request whose answer is whole before its COMMIT (its rows stamped)
// stores it there, and Run stores nothing after. A retry whose first answer was lost on
// the way back replays that answer at once, not the committed revisions after the
// lease. The commit's first batch locked the row under the request's token
// (QueueLock). A nil hold queues nothing.
func QueueDone(b *pgx.Batch, hold *Hold, answer any) error {
	if hold == nil {
		return nil
	}
	args, err := hold.markArgs(rowseal.LabelAnswer, answer)
	if err != nil {
		return err
	}
	b.Queue(doneSQL, args...)
	hold.committed, hold.stored = false, true
	return nil
}

// MarkDone stores the answer in the commit's transaction tx, under the request's token
// only: ErrTakenOver when a retry took the key over. Run then stores nothing more. A
// nil hold marks nothing.
func MarkDone(ctx context.Context, tx pgx.Tx, hold *Hold, answer any) error {
	if err := hold.mark(ctx, tx, doneSQL, rowseal.LabelAnswer, answer); err != nil || hold == nil {
		return err
	}
	hold.stored = true
	return nil
}

func (h *Hold) mark(ctx context.Context, tx pgx.Tx, sql, label string, value any) error {
	if h == nil {
		return nil
	}
	args, err := h.markArgs(label, value)
	if err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("mark the Idempotency-Key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrTakenOver
	}
	return nil
}

// markArgs are the arguments of a mark's statement (committedSQL, doneSQL): the key's
// row under the request's token, value as JSON sealed under the claim's key with label,
// and the ids it names (an erasure's fence finds the answers naming what it removed).
func (h *Hold) markArgs(label string, value any) ([]any, error) {
	raw, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	sealed, err := rowseal.Seal(h.key, label, raw)
	if err != nil {
		return nil, err
	}
	return []any{h.org, h.keyHash, h.token, sealed, namesOf(raw)}, nil
}

// storeAnswer stores a request's answer after its commit. Behind a commit that marked
// the key committed it commits asynchronously: an
// answer a crash loses leaves the key committed, which a retry answers from the
// committed revisions once the lease is over, as for an answer never stored. Behind
// one that did not (its request marked nothing), the answer is all a retry has, and
// its commit waits for the WAL flush.
func (s *Store) storeAnswer(ctx context.Context, hold *Hold, answer []byte) error {
	if hold == nil {
		return nil
	}
	sealed, err := rowseal.Seal(hold.key, rowseal.LabelAnswer, answer)
	if err != nil {
		return err
	}
	sql := doneSQL
	if hold.committed {
		sql = doneAsyncSQL
	}
	_, err = s.pool.Exec(context.WithoutCancel(ctx), sql, hold.org, hold.keyHash, hold.token, sealed, namesOf(answer))
	return err
}

func (s *Store) release(ctx context.Context, hold *Hold) {
	if hold == nil {
		return
	}
	if _, err := s.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM loom.idempotency WHERE org = $1 AND key_hash = $2 AND token = $3`,
		hold.org, hold.keyHash, hold.token); err != nil {
		s.log.Warn("idempotency: cannot release a claim; it lapses with its lease", "err", err)
	}
}

// QueueFenceErased queues, in an erasure's transaction, the fence of the answers
// naming what the erasure removed (its evidence; internal/erasure's registry holds the
// scope, args as erasure.ScopeParams names them): a new token, so a request still
// holding the key stores no answer, and a retry answers 404 for the whole request.
// fenced holds how many once the batch is sent.
func QueueFenceErased(b *pgx.Batch, args []any, fenced *int64) {
	b.Queue(erasure.ScopeParams+` UPDATE loom.idempotency t SET state = 'erased', revisions = NULL, answer = NULL,
			sealed_revisions = NULL, sealed_answer = NULL, data_key = NULL, names = NULL, token = t.token + 1
		FROM p WHERE `+scope(), args...).Exec(func(tag pgconn.CommandTag) error {
		*fenced = tag.RowsAffected()
		return nil
	})
}

// scope is loom.idempotency's erasure scope predicate.
func scope() string {
	for _, t := range erasure.Tables() {
		if t.Store == erasure.Postgres && t.Name == "loom.idempotency" {
			return t.Scope
		}
	}
	panic("internal/erasure's registry has no loom.idempotency")
}

// Sweep deletes keys past their 24 hours, a few thousand a pass.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM loom.idempotency WHERE ctid IN (
		SELECT ctid FROM loom.idempotency WHERE expires_at < now() LIMIT 5000)`)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}
