// Package outbox owns the statements over loom.outbox: the encoded Kafka records a
// commit queued in its own transaction and the relay has not published yet. Commits,
// erasures, redactions and republish queue records; the relay reads, deletes, counts
// refusals and parks them; health reads the backlog. A revision's record is queued by
// reference to its journal row and sealed as the relay publishes it (revision.go).
// docs/architecture.md describes the flow.
package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/pg"
)

// Channel is the NOTIFY channel that wakes the relay when records are queued.
const Channel = "loom_outbox"

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Record is one encoded Kafka record of a namespace's seq.
type Record struct {
	Org, Namespace string
	Seq            int64
	Topic          string
	Key            []byte
	Headers        []byte // JSON [[name, value], …]
	Value          []byte
	// Vectors, set, queue a revision's record by reference (revision.go): Value is its
	// envelope with StubSealed for its content, and these its vectors sealed.
	Vectors []byte
}

// Row is a queued record as the relay reads it.
type Row struct {
	Record
	ID        int64
	Attempts  int // refusals so far
	CreatedAt time.Time
	// Journal is the referenced revision's, read with a row queued by reference.
	Journal Journal
}

// Queue queues the insert of rec on b, inside the transaction that commits its seq.
func Queue(b *pgx.Batch, rec Record) {
	b.Queue(`INSERT INTO loom.outbox (org, namespace, seq, topic, record_key, headers, value, vectors) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		rec.Org, rec.Namespace, rec.Seq, rec.Topic, rec.Key, rec.Headers, rec.Value, rec.Vectors)
}

// QueueMany queues the insert of recs on b in one statement, inside the transaction
// that commits their seqs: their ids are drawn in recs' order, which the relay
// publishes in.
func QueueMany(b *pgx.Batch, recs []Record) {
	if len(recs) == 1 {
		Queue(b, recs[0])
		return
	}
	n := len(recs)
	orgs, namespaces, topics, headers := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	seqs := make([]int64, n)
	keys, values, vectors := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i, r := range recs {
		orgs[i], namespaces[i], seqs[i], topics[i] = r.Org, r.Namespace, r.Seq, r.Topic
		keys[i], headers[i], values[i], vectors[i] = r.Key, string(r.Headers), r.Value, r.Vectors
	}
	b.Queue(`INSERT INTO loom.outbox (org, namespace, seq, topic, record_key, headers, value, vectors)
		SELECT t.org, t.namespace, t.seq, t.topic, t.record_key, t.headers::jsonb, t.value, t.vectors
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bytea[], $6::text[], $7::bytea[], $8::bytea[])
			WITH ORDINALITY AS t(org, namespace, seq, topic, record_key, headers, value, vectors, ord)
		ORDER BY t.ord`,
		orgs, namespaces, seqs, topics, keys, headers, values, vectors)
}

// QueueNotify queues the NOTIFY that wakes the relay once the transaction commits.
func QueueNotify(b *pgx.Batch) {
	b.Queue(`SELECT pg_notify('` + Channel + `', '')`)
}

// ReadPending reads the oldest unparked rows, at most limit, leaving out the
// namespaces (org/namespace) in skip.
func ReadPending(ctx context.Context, q Querier, limit int, skip []string) ([]Row, error) {
	rows, err := q.Query(ctx, readPendingSQL, limit, skipList(skip))
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	return collectPending(rows)
}

// QueueReadPending queues ReadPending's read on b; into holds the rows once b is sent.
func QueueReadPending(b *pgx.Batch, limit int, skip []string, into *[]Row) {
	b.Queue(readPendingSQL, limit, skipList(skip)).Query(func(rows pgx.Rows) error {
		var err error
		*into, err = collectPending(rows)
		return err
	})
}

// readPendingSQL reads a row queued by reference with its revision's journal row and
// data key (Journal), by their primary keys. The revision's key is its sealed text's
// (a row sealed before migration 171 keeps it in its JSON instead, and the column holds
// only its reference), and so are its agent and session (sealed since migration 173,
// before it in the JSON: the columns hold their references). The user comes as its column holds it, a reference: the text
// the relay opens names it (OpenTexts), and NameUsers names it only for a row sealed
// before migration 155. Named here, by loom.user_name, it cost a key's unwrap and a
// decrypt per row, about half of the read's Postgres time.
//
// The revision is read as the newest of the namespace's at or below the row's seq, kept
// only when it is that seq's: an order only the journal's primary key gives, so the plan
// is that key's lookup whatever the statistics. Joined by equality, a plan made while
// the journal was new and unanalysed (the relay's prepared statement keeps its generic
// plan until an ANALYZE) scanned memory_revisions_by_user, the org's whole journal, for
// every row read.
const readPendingSQL = `SELECT o.id, o.org, o.namespace, o.seq, o.topic, o.record_key, o.headers, o.value, o.attempts, o.created_at,
			o.vectors, coalesce(r.row->>'memory_key', ''), r.user_id, r.sealed, k.data_key, coalesce(r.row->>'agent', ''), coalesce(r.row->>'session_id', '')
		FROM loom.outbox o
		LEFT JOIN LATERAL (SELECT r.seq, r.row, r.user_id, r.sealed FROM loom.memory_revisions r
			WHERE o.vectors IS NOT NULL AND r.org = o.org AND r.namespace = o.namespace AND r.seq <= o.seq
			ORDER BY r.seq DESC LIMIT 1) r ON r.seq = o.seq
		LEFT JOIN loom.revision_keys k ON o.vectors IS NOT NULL AND k.org = o.org AND k.namespace = o.namespace AND k.seq = o.seq
		WHERE o.parked_at IS NULL AND o.org || '/' || o.namespace <> ALL($2::text[])
		ORDER BY o.id LIMIT $1`

func skipList(skip []string) []string {
	if skip == nil {
		return []string{}
	}
	return skip
}

func collectPending(rows pgx.Rows) ([]Row, error) {
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var o Row
		var memoryKey string
		var userRef *string // NULL: no revision (not queued by reference, or erased since)
		if err := rows.Scan(&o.ID, &o.Org, &o.Namespace, &o.Seq, &o.Topic, &o.Key, &o.Headers, &o.Value, &o.Attempts, &o.CreatedAt,
			&o.Vectors, &memoryKey, &userRef, &o.Journal.Sealed, &o.Journal.DataKey, &o.Journal.Agent, &o.Journal.SessionID); err != nil {
			return nil, fmt.Errorf("read outbox: %w", err)
		}
		if userRef != nil {
			o.Journal.MemoryKey, o.Journal.UserRef = memoryKey, *userRef
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	return out, nil
}

// Delete removes published rows.
func Delete(ctx context.Context, pool *pgxpool.Pool, ids []int64) error {
	err := pg.InPipelinedTx(ctx, pool, func(pgx.Tx) (*pgx.Batch, error) {
		b := &pgx.Batch{}
		queueDeleteStatements(b, ids)
		return b, nil
	})
	if err != nil {
		return fmt.Errorf("delete published outbox rows: %w", err)
	}
	return nil
}

// QueueDelete queues on b the removal of published rows, for a session that sends
// other statements in the same round trip (the relay's lock session: the delete, the
// lock's release and the next round's read go together). The session commits
// asynchronously (SessionCommitsAsync): lost in a crash, the delete only publishes its
// rows again. With ownTx the delete is a transaction of its own, committed before the
// statements queued after it (one that may wait, as a lock's take does, must not
// hold the deleted rows' locks meanwhile); committed is then called once it committed,
// and a delete that failed leaves the session in a failed transaction, which its owner
// rolls back. Without, the delete commits with the batch's implicit transaction, when
// the batch's last statement answered: committed is not called, the batch's success is
// the delete's.
func QueueDelete(b *pgx.Batch, ids []int64, ownTx bool, committed func()) {
	if !ownTx {
		b.Queue(deletePublished, ids)
		return
	}
	b.Queue("BEGIN")
	b.Queue(deletePublished, ids)
	b.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		committed()
		return nil
	})
}

// SessionCommitsAsync is the statement, answering nothing, that makes a session's
// commits asynchronous when ok is true: the relay's lock session, whose only writes are
// QueueDelete's, and which is closed, never pooled again, when the relay lets the lock
// go. It saves each delete a transaction's BEGIN, SET LOCAL and COMMIT.
const SessionCommitsAsync = "set_config('synchronous_commit', 'off', false)"

// deletePublished removes the rows the relay read. parked_at IS NULL: the rows are the
// unparked ones the relay read, and the predicate lets the delete use outbox_pending,
// the table's index on id.
const deletePublished = "DELETE FROM loom.outbox WHERE id = ANY($1) AND parked_at IS NULL"

func queueDeleteStatements(b *pgx.Batch, ids []int64) {
	// Lost in a crash, the delete only publishes its rows again, which the topic's
	// at-least-once contract allows; waiting for its WAL flush would slow every
	// commit that shares the flush.
	b.Queue("SET LOCAL synchronous_commit = off")
	b.Queue(deletePublished, ids)
}

// NoteFailures records each row's last error and adds refused[i] (0 or 1) to its
// refusals.
func NoteFailures(ctx context.Context, q Querier, ids []int64, refused []int32, errs []string) error {
	_, err := q.Exec(ctx, `UPDATE loom.outbox o SET attempts = o.attempts + f.refused, last_error = f.err
		FROM unnest($1::bigint[], $2::int[], $3::text[]) AS f(id, refused, err) WHERE o.id = f.id AND o.parked_at IS NULL`, ids, refused, errs)
	if err != nil {
		return fmt.Errorf("record failed produces: %w", err)
	}
	return nil
}

// Park marks a row parked after attempts refusals: it stays for an operator and is
// never read for publishing again.
func Park(ctx context.Context, q Querier, id int64, attempts int, cause string) error {
	if _, err := q.Exec(ctx, `UPDATE loom.outbox SET parked_at = now(), attempts = $2, last_error = $3 WHERE id = $1 AND parked_at IS NULL`,
		id, attempts, cause); err != nil {
		return fmt.Errorf("mark outbox row %d parked: %w", id, err)
	}
	return nil
}

// Backlog is what waits in the outbox.
type Backlog struct {
	Depth      int64   // records not yet published
	Parked     int64   // records parked after Kafka refused them
	OldestAgeS float64 // age of the oldest record not yet published, in seconds
}

// ReadBacklog counts what waits in the outbox.
func ReadBacklog(ctx context.Context, q Querier) (Backlog, error) {
	var s Backlog
	err := q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE parked_at IS NULL), count(*) FILTER (WHERE parked_at IS NOT NULL),
		coalesce(extract(epoch FROM now() - min(created_at) FILTER (WHERE parked_at IS NULL)), 0)::float8
		FROM loom.outbox`).Scan(&s.Depth, &s.Parked, &s.OldestAgeS)
	if err != nil {
		return s, fmt.Errorf("read the outbox backlog: %w", err)
	}
	return s, nil
}

// TakeWaiting deletes a namespace's rows from fromSeq on that a republish for topic
// replaces, in tx, and returns those not parked, in seq order: every unparked row,
// and a parked row only of topic (the relay parks it again if Kafka still refuses it).
// A row queued by reference comes back with its vectors, to be queued again as it was.
func TakeWaiting(ctx context.Context, tx pgx.Tx, org, namespace string, fromSeq int64, topic string) ([]Record, error) {
	rows, err := tx.Query(ctx, `DELETE FROM loom.outbox
		WHERE org = $1 AND namespace = $2 AND seq >= $3 AND (parked_at IS NULL OR topic = $4)
		RETURNING seq, topic, record_key, headers, value, vectors, parked_at IS NOT NULL`, org, namespace, fromSeq, topic)
	if err != nil {
		return nil, fmt.Errorf("take out the waiting outbox rows of %s/%s: %w", org, namespace, err)
	}
	defer rows.Close()
	var waiting []Record
	for rows.Next() {
		e := Record{Org: org, Namespace: namespace}
		var parked bool
		if err := rows.Scan(&e.Seq, &e.Topic, &e.Key, &e.Headers, &e.Value, &e.Vectors, &parked); err != nil {
			return nil, fmt.Errorf("take out the waiting outbox rows: %w", err)
		}
		if !parked {
			waiting = append(waiting, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("take out the waiting outbox rows: %w", err)
	}
	return waiting, nil
}

// Withdraw deletes, in tx, the rows an erasure's scope covers: with is the erasure's
// parameter CTE (alias p), scope its predicate over the table (alias t) and p. It
// returns how many rows it deleted and how many of them were unpublished (a parked
// row's seq went out as a placeholder already).
func Withdraw(ctx context.Context, tx pgx.Tx, with, scope string, args ...any) (deleted, unpublished int64, err error) {
	rows, err := tx.Query(ctx, fmt.Sprintf(`%s DELETE FROM loom.outbox t USING p WHERE %s RETURNING t.parked_at IS NULL`, with, scope), args...)
	if err != nil {
		return 0, 0, err
	}
	pending, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil {
		return 0, 0, err
	}
	for _, p := range pending {
		if p {
			unpublished++
		}
	}
	return int64(len(pending)), unpublished, nil
}
