// Package extractqueue owns the statements over loom.extraction_requests: the
// authority on every deferred memory.set_from_messages. The write side enqueues a
// request (its row and its record on the extraction topic, in one transaction), the
// extraction workers claim, renew, finish and release rows, and their housekeeping
// queues a new record for a row that is due again; the read side answers the status
// operations and search's pending_extraction from it.
//
// A row's life: pending → running (a claim: a lease and a new claim token) → done, or
// back to pending (a transient failure: no attempt spent; a counted one: attempts + 1
// and a backoff), held (the namespace's cost cap: until it resets), or failed after the
// last attempt. A running row whose lease lapsed is claimable again. Every change a
// worker makes names its claim token, so a worker that lost its row changes nothing.
package extractqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/rowseal"
)

// Statuses of a request.
const (
	StatusPending = "pending"
	StatusRunning = "running"
	StatusHeld    = "held"
	StatusDone    = "done"
	StatusFailed  = "failed"
)

// ErrLost: the worker's claim is no longer the row's (another worker took it over
// after its lease lapsed, or an erasure deleted it).
var ErrLost = errors.New("the extraction request is no longer this worker's")

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// NewRequest is a request as it is enqueued.
type NewRequest struct {
	Org, Namespace, QueueID      string
	Agent, UserID, SessionID     string
	TokenID, TokenRole, ReadUser string
	DataKey, Payload             []byte // the sealed request and the key that opens it, as stored (wrapped under the KEK)
	// WhoKey and Who: the request's agent and session sealed (SealWho) under a key of
	// the row's own, kept until the row is deleted (the columns hold their references,
	// migration 177; DataKey and Payload go when the request is done).
	WhoKey, Who []byte
	Messages    int
}

// who is what a request's Who seals.
type who struct {
	Agent   string `json:"agent"`
	Session string `json:"session"`
}

// SealWho seals a request's agent and session under key (unwrapped), as
// loom.request_who opens it.
func SealWho(key []byte, agent, session string) ([]byte, error) {
	plain, err := json.Marshal(who{Agent: agent, Session: session})
	if err != nil {
		return nil, err
	}
	out, err := rowseal.Seal(key, rowseal.LabelRequestWho, plain)
	if err != nil {
		return nil, fmt.Errorf("seal the request's agent and session: %w", err)
	}
	return out, nil
}

// openWho decodes loom.request_who's answer into agent and session.
func openWho(opened string, agent, session *string) error {
	var w who
	if err := json.Unmarshal([]byte(opened), &w); err != nil {
		return fmt.Errorf("decode a request's agent and session: %w", err)
	}
	*agent, *session = w.Agent, w.Session
	return nil
}

// Enqueue records a request and queues its first record, in tx. It reads the
// namespace's generation under its row lock (creating it when the namespace has
// none), so an erasure of the scope either sees the request or fences it out.
func Enqueue(ctx context.Context, tx pgx.Tx, r NewRequest, rec outbox.Record) error {
	gen, err := generations.Advance(ctx, tx, r.Org, r.Namespace, 0)
	if err != nil {
		return fmt.Errorf("lock the generation of %s: %w", r.Namespace, err)
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO loom.extraction_requests (org, queue_id, namespace, agent, user_id, session_id, generation,
			token_id, token_role, read_user_id, status, data_key, payload, messages, who_key, who)
		SELECT $1, $2, $3, w.r[2], loom.named_user($1, $5), w.r[3], $7, $8, $9, loom.named_user($1, $10), 'pending', $11, $12, $13, $14, $15
		FROM (SELECT loom.writer_refs($1, '', $4, $6) AS r) w`,
		r.Org, r.QueueID, r.Namespace, r.Agent, r.UserID, r.SessionID, gen, r.TokenID, r.TokenRole, r.ReadUser,
		r.DataKey, r.Payload, r.Messages, r.WhoKey, r.Who)
	outbox.Queue(b, rec)
	outbox.QueueNotify(b)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("record the extraction request: %w", err)
	}
	return nil
}

// Claim is a worker's hold on a request.
type Claim struct {
	Org, Namespace, QueueID      string
	Agent, UserID, SessionID     string
	TokenID, TokenRole, ReadUser string
	Token                        int64 // the claim token every later change names
	Attempts                     int   // counted failures so far
	DataKey                      []byte
}

// TryClaim takes a request that is due (pending or held past its next attempt) or
// whose holder's lease lapsed, under a lease. nil when it is not claimable now: done,
// failed, erased, not due, or running under another worker's live lease.
func TryClaim(ctx context.Context, q Querier, org, queueID string, lease time.Duration) (*Claim, error) {
	c := &Claim{Org: org, QueueID: queueID}
	var opened string
	err := q.QueryRow(ctx, `UPDATE loom.extraction_requests SET status = 'running', claim_token = claim_token + 1,
			lease_until = now() + $3::interval, updated_at = now()
		WHERE org = $1 AND queue_id = $2 AND data_key IS NOT NULL AND (
			(status IN ('pending', 'held') AND next_attempt_at <= now()) OR (status = 'running' AND lease_until < now()))
		RETURNING namespace, loom.request_who(who, who_key), loom.user_name(org, user_id), token_id, token_role, loom.user_name(org, read_user_id), claim_token, attempts, loom.unwrapped_key(data_key)`,
		org, queueID, lease.String()).
		Scan(&c.Namespace, &opened, &c.UserID, &c.TokenID, &c.TokenRole, &c.ReadUser, &c.Token, &c.Attempts, &c.DataKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim extraction request %s: %w", queueID, err)
	}
	if err := openWho(opened, &c.Agent, &c.SessionID); err != nil {
		return nil, err
	}
	return c, nil
}

// Renew extends a claim's lease; ErrLost when the claim is no longer the row's.
func Renew(ctx context.Context, q Querier, c *Claim, lease time.Duration) error {
	tag, err := q.Exec(ctx, `UPDATE loom.extraction_requests SET lease_until = now() + $4::interval, updated_at = now()
		WHERE org = $1 AND queue_id = $2 AND claim_token = $3 AND status = 'running'`, c.Org, c.QueueID, c.Token, lease.String())
	return changed(tag, err, "renew the lease of extraction request "+c.QueueID)
}

// Finish marks a claimed request done with its result and destroys its sealed
// payload and key, in the transaction that commits its facts when there are any.
func Finish(ctx context.Context, q Querier, c *Claim, result []byte) error {
	tag, err := q.Exec(ctx, `UPDATE loom.extraction_requests SET status = 'done', result = $4, last_error = NULL,
			data_key = NULL, payload = NULL, lease_until = NULL, finished_at = now(), updated_at = now()
		WHERE org = $1 AND queue_id = $2 AND claim_token = $3 AND status = 'running'`, c.Org, c.QueueID, c.Token, result)
	return changed(tag, err, "mark extraction request "+c.QueueID+" done")
}

// Release is how a claimed request goes back: to Status (pending or held) with its
// next attempt After from now, an attempt counted or not; a counted attempt that is
// the MaxAttempts-th fails the request for good.
type Release struct {
	Status       string
	After        time.Duration
	CountAttempt bool
	MaxAttempts  int
	Error        string
}

// Give releases a claim as r says and answers the status the row took.
func Give(ctx context.Context, q Querier, c *Claim, r Release) (string, error) {
	count := 0
	if r.CountAttempt {
		count = 1
	}
	var status string
	err := q.QueryRow(ctx, `UPDATE loom.extraction_requests SET attempts = attempts + $4,
			status = CASE WHEN $4 = 1 AND attempts + 1 >= $5 THEN 'failed' ELSE $6 END,
			finished_at = CASE WHEN $4 = 1 AND attempts + 1 >= $5 THEN now() END,
			next_attempt_at = now() + $7::interval, lease_until = NULL, last_error = $8, updated_at = now()
		WHERE org = $1 AND queue_id = $2 AND claim_token = $3 AND status = 'running'
		RETURNING status`, c.Org, c.QueueID, c.Token, count, r.MaxAttempts, r.Status, r.After.String(), r.Error).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrLost
	}
	if err != nil {
		return "", fmt.Errorf("release extraction request %s: %w", c.QueueID, err)
	}
	return status, nil
}

// Postpone moves an open request's next attempt to at least until, so the
// housekeeping queues a record for it then: a worker that passes a due record by
// (paused after the provider refused its key) calls it before it moves on.
func Postpone(ctx context.Context, q Querier, org, queueID string, until time.Time) error {
	_, err := q.Exec(ctx, `UPDATE loom.extraction_requests SET next_attempt_at = greatest(next_attempt_at, $3), updated_at = now()
		WHERE org = $1 AND queue_id = $2 AND status IN ('pending', 'held')`, org, queueID, until)
	if err != nil {
		return fmt.Errorf("postpone extraction request %s: %w", queueID, err)
	}
	return nil
}

// Queued is an open request a new record is queued for.
type Queued struct {
	Org, Namespace, QueueID  string
	Agent, UserID, SessionID string
	CreatedAt                time.Time
	Records                  int // this record's number
	Payload                  []byte
}

// Requeue queues a new record, built by record, for up to limit open requests that
// are due one: a pending or held request past its next attempt whose last record
// went out before it, a running one whose lease lapsed after its last record, and a
// due one whose last record is older than stale (the topic may no longer hold it). It
// runs in one transaction, rows locked SKIP LOCKED, so two workers never queue the
// same request twice, and answers how many it queued.
func Requeue(ctx context.Context, pool *pgxpool.Pool, limit int, stale time.Duration, record func(Queued) (outbox.Record, error)) (int, error) {
	n := 0
	err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `WITH due AS (
				SELECT org, queue_id FROM loom.extraction_requests
				WHERE status IN ('pending', 'running', 'held') AND payload IS NOT NULL AND (
					(status IN ('pending', 'held') AND next_attempt_at <= now()
						AND (queued_at < next_attempt_at OR queued_at < now() - $2::interval))
					OR (status = 'running' AND lease_until < now() AND queued_at < lease_until))
				ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
			UPDATE loom.extraction_requests r SET queued_at = now(), records = r.records + 1, updated_at = now()
			FROM due WHERE r.org = due.org AND r.queue_id = due.queue_id
			RETURNING r.org, r.namespace, r.queue_id::text, loom.request_who(r.who, r.who_key), loom.user_name(r.org, r.user_id), r.created_at, r.records, r.payload`,
			limit, stale.String())
		if err != nil {
			return err
		}
		due, err := queueRecords(ctx, tx, rows, record)
		n = len(due)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("queue records for due extraction requests: %w", err)
	}
	return n, nil
}

// Retry gives each of a token's failed requests among ids one more attempt and queues
// its record, in one transaction; it answers the requests it accepted. Identity,
// payload and key stay as they were: a request an erasure deleted has nothing to retry.
func Retry(ctx context.Context, pool *pgxpool.Pool, org, tokenID string, ids []string, maxAttempts int,
	record func(Queued) (outbox.Record, error)) ([]string, error) {
	var accepted []string
	err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		// An org whose model calls are held gets its requests back held, not pending:
		// they run once the hold is released (ResumeHeld).
		rows, err := tx.Query(ctx, `UPDATE loom.extraction_requests SET attempts = least(attempts, $4 - 1),
				status = CASE WHEN EXISTS (SELECT 1 FROM loom.model_call_holds h WHERE h.org = $1) THEN 'held' ELSE 'pending' END,
				next_attempt_at = now(), queued_at = now(), records = records + 1, last_error = NULL, finished_at = NULL,
				updated_at = now()
			WHERE org = $1 AND token_id = $2 AND queue_id::text = ANY($3) AND status = 'failed' AND payload IS NOT NULL
			RETURNING org, namespace, queue_id::text, loom.request_who(who, who_key), loom.user_name(org, user_id), created_at, records, payload`,
			org, tokenID, ids, maxAttempts)
		if err != nil {
			return err
		}
		due, err := queueRecords(ctx, tx, rows, record)
		for _, q := range due {
			accepted = append(accepted, q.QueueID)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retry extraction requests: %w", err)
	}
	return accepted, nil
}

// View is a request as the status operations answer it.
type View struct {
	QueueID       string          `json:"queue_id"`
	Namespace     string          `json:"namespace"`
	Agent         string          `json:"agent"`
	UserID        string          `json:"user_id"`
	SessionID     string          `json:"session_id"`
	Status        string          `json:"status"`
	Attempts      int             `json:"attempts"`
	Messages      int             `json:"messages"`
	LastError     string          `json:"last_error,omitempty"`
	NextAttemptAt *time.Time      `json:"next_attempt_at,omitempty"`
	LeaseUntil    *time.Time      `json:"lease_until,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	FinishedAt    *time.Time      `json:"finished_at,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
}

// Filter narrows a status read. Org is required; the rest narrow when set.
type Filter struct {
	Org, Namespace, TokenID, UserID string
	QueueIDs                        []string
	Status                          string
	Limit                           int
}

// List reads the requests f names, newest first.
func List(ctx context.Context, q Querier, f Filter) ([]View, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.QueueIDs == nil {
		f.QueueIDs = []string{}
	}
	rows, err := q.Query(ctx, `SELECT queue_id::text, namespace, loom.request_who(who, who_key), loom.user_name(org, user_id), status, attempts, messages,
			coalesce(last_error, ''), CASE WHEN status IN ('pending', 'held') THEN next_attempt_at END,
			CASE WHEN status = 'running' THEN lease_until END, created_at, updated_at, finished_at, result
		FROM loom.extraction_requests
		WHERE org = $1 AND ($2 = '' OR namespace = $2) AND ($3 = '' OR token_id = $3) AND ($4 = '' OR user_id = (SELECT loom.user_ref($1, $4)))
		  AND (cardinality($5::text[]) = 0 OR queue_id::text = ANY($5)) AND ($6 = '' OR status = $6)
		ORDER BY created_at DESC, queue_id LIMIT $7`, f.Org, f.Namespace, f.TokenID, f.UserID, f.QueueIDs, f.Status, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("read extraction requests: %w", err)
	}
	defer rows.Close()
	out := []View{}
	for rows.Next() {
		var v View
		var result []byte
		var opened string
		if err := rows.Scan(&v.QueueID, &v.Namespace, &opened, &v.UserID, &v.Status, &v.Attempts, &v.Messages,
			&v.LastError, &v.NextAttemptAt, &v.LeaseUntil, &v.CreatedAt, &v.UpdatedAt, &v.FinishedAt, &result); err != nil {
			return nil, fmt.Errorf("read extraction requests: %w", err)
		}
		if err := openWho(opened, &v.Agent, &v.SessionID); err != nil {
			return nil, err
		}
		if result != nil {
			v.Result = result
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

const pending = `SELECT EXISTS (SELECT 1 FROM loom.extraction_requests
	WHERE org = $1 AND namespace = ANY($2) AND status IN ('pending', 'running', 'held') AND ($3 = '' OR user_id = (SELECT loom.user_ref($1, $3))))`

// QueuePending queues on b the read of whether any request of the namespaces (of
// userID's, when set) is not yet done, into into: what search and memory.ask report
// as pending_extraction, read in the round trip of the search's other reads.
func QueuePending(b *pgx.Batch, org string, namespaces []string, userID string, into *bool) {
	b.Queue(pending, org, namespaces, userID).QueryRow(func(r pgx.Row) error {
		if err := r.Scan(into); err != nil {
			return fmt.Errorf("read pending extraction requests: %w", err)
		}
		return nil
	})
}

// QueueNamespacesOfUser queues on b the read of the namespaces of org where user has a
// request, into into: the requests' part of the namespaces an erasure of the user fences.
func QueueNamespacesOfUser(b *pgx.Batch, org, user string, into *[]string) {
	b.Queue(`SELECT DISTINCT namespace FROM loom.extraction_requests WHERE org = $1 AND user_id = ANY((SELECT loom.user_refs($1, $2))::text[])`, org, user).
		Query(func(rows pgx.Rows) error {
			var err error
			*into, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
}

func changed(tag pgconn.CommandTag, err error, doing string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", doing, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrLost
	}
	return nil
}

// Record stores a done request's result.
func Record(ctx context.Context, q Querier, c *Claim, result []byte) error {
	tag, err := q.Exec(ctx, `UPDATE loom.extraction_requests SET result = $4, updated_at = now()
		WHERE org = $1 AND queue_id = $2 AND claim_token = $3 AND status = 'done'`, c.Org, c.QueueID, c.Token, result)
	return changed(tag, err, "store the result of extraction request "+c.QueueID)
}

// queueRecords reads the requests rows returns (the columns of Queued, in order) and
// queues a record of each in tx's outbox.
func queueRecords(ctx context.Context, tx pgx.Tx, rows pgx.Rows, record func(Queued) (outbox.Record, error)) ([]Queued, error) {
	var due []Queued
	for rows.Next() {
		var q Queued
		var opened string
		if err := rows.Scan(&q.Org, &q.Namespace, &q.QueueID, &opened, &q.UserID, &q.CreatedAt, &q.Records, &q.Payload); err != nil {
			rows.Close()
			return nil, err
		}
		if err := openWho(opened, &q.Agent, &q.SessionID); err != nil {
			rows.Close()
			return nil, err
		}
		due = append(due, q)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(due) == 0 {
		return nil, err
	}
	b := &pgx.Batch{}
	for _, q := range due {
		rec, err := record(q)
		if err != nil {
			return nil, err
		}
		outbox.Queue(b, rec)
	}
	outbox.QueueNotify(b)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return due, nil
}

// ResumeHeld makes an org's held requests due now, once its model calls are released:
// the housekeeping queues a record for each at its next round.
func ResumeHeld(ctx context.Context, q Querier, org string) (int64, error) {
	tag, err := q.Exec(ctx, `UPDATE loom.extraction_requests SET next_attempt_at = now(), updated_at = now()
		WHERE org = $1 AND status = 'held'`, org)
	if err != nil {
		return 0, fmt.Errorf("resume the org's held extraction requests: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Census is the deployment's extraction queue as the operator reads it: requests by
// status, and the oldest still owed (pending, running or held).
type Census struct {
	ByStatus      map[string]int64 `json:"by_status"`
	OldestOwedAt  *time.Time       `json:"oldest_owed_at"`
	OldestOwedAge float64          `json:"oldest_owed_age_s"`
	Orgs          int64            `json:"orgs_owing"`
}

// ReadCensus counts every org's requests by status: numbers only, nothing of a
// request's content or identity.
func ReadCensus(ctx context.Context, q Querier) (Census, error) {
	c := Census{ByStatus: map[string]int64{StatusPending: 0, StatusRunning: 0, StatusHeld: 0, StatusDone: 0, StatusFailed: 0}}
	rows, err := q.Query(ctx, `SELECT status, count(*) FROM loom.extraction_requests GROUP BY status`)
	if err != nil {
		return c, fmt.Errorf("count extraction requests: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return c, fmt.Errorf("count extraction requests: %w", err)
		}
		c.ByStatus[status] = n
	}
	if err := rows.Err(); err != nil {
		return c, fmt.Errorf("count extraction requests: %w", err)
	}
	err = q.QueryRow(ctx, `SELECT min(queued_at), coalesce(extract(epoch FROM now() - min(queued_at)), 0)::float8, count(DISTINCT org)
		FROM loom.extraction_requests WHERE status IN ('pending', 'running', 'held')`).Scan(&c.OldestOwedAt, &c.OldestOwedAge, &c.Orgs)
	if err != nil {
		return c, fmt.Errorf("read the oldest owed extraction: %w", err)
	}
	return c, nil
}
