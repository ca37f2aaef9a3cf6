package auditchain

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/ch"
)

// Namespace names one chain.
type Namespace struct{ Org, Namespace string }

// rowColumns are what a walk reads of an audit row.
const rowColumns = `org, namespace, seq, op, event_type, occurred_at, actor, agent, session_id,
	toString(memory_id), version, source_class, status, request_id, prev_hash, row_hash,
	subject_commitment, memory_key, content_sha256, user_id, subject_salt, detail, chain_format`

// Namespaces lists the chains in ClickHouse's serving audit_log, optionally of one org
// (and one namespace of it).
func Namespaces(ctx context.Context, conn *ch.Conn, org, namespace string) ([]Namespace, error) {
	where, args := "1", []any{}
	if org != "" {
		where, args = "org = ?", append(args, org)
		if namespace != "" {
			where, args = where+" AND namespace = ?", append(args, namespace)
		}
	}
	var out []Namespace
	err := conn.Each(conn.Ctx(ctx), "SELECT DISTINCT org, namespace FROM "+ch.Database+".audit_log WHERE "+where+" ORDER BY org, namespace", args,
		func(scan func(...any) error) error {
			var n Namespace
			if err := scan(&n.Org, &n.Namespace); err != nil {
				return err
			}
			out = append(out, n)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("list the audit chains: %w", err)
	}
	return out, nil
}

// MaxPurge is the highest seq of a purging erasure's audit row in the namespace; 0 when
// none.
func MaxPurge(ctx context.Context, conn *ch.Conn, n Namespace) (uint64, error) {
	var seq uint64
	err := conn.QueryRow(conn.Ctx(ctx), "SELECT max(seq) FROM "+ch.Database+".audit_log WHERE org = ? AND namespace = ? AND op = ? AND status = ?",
		n.Org, n.Namespace, OpErasure, StatusPurged).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("read the purges of %s/%s: %w", n.Org, n.Namespace, err)
	}
	return seq, nil
}

// EachRow reads the namespace's audit rows after seq, in seq order, at most limit
// (0: all), collapsed as the table collapses them.
func EachRow(ctx context.Context, conn *ch.Conn, n Namespace, after uint64, limit int, fn func(Row) error) error {
	q := "SELECT " + rowColumns + " FROM " + ch.Database + ".audit_log FINAL WHERE org = ? AND namespace = ? AND seq > ? ORDER BY seq, op"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	err := conn.Each(conn.Ctx(ctx), q, []any{n.Org, n.Namespace, after}, func(scan func(...any) error) error {
		var r Row
		if err := scan(&r.Org, &r.Namespace, &r.Seq, &r.Op, &r.EventType, &r.OccurredAt, &r.Actor, &r.Agent, &r.SessionID,
			&r.MemoryID, &r.Version, &r.SourceClass, &r.Status, &r.RequestID, &r.PrevHash, &r.RowHash,
			&r.SubjectCommitment, &r.Subject.MemoryKey, &r.Subject.ContentSHA256, &r.Subject.UserID, &r.Subject.Salt, &r.Detail, &r.Format); err != nil {
			return err
		}
		return fn(r)
	})
	if err != nil {
		return fmt.Errorf("read the audit rows of %s/%s: %w", n.Org, n.Namespace, err)
	}
	return nil
}

// Checkpoints reads the namespace's checkpoints in seq order.
func Checkpoints(ctx context.Context, pool *pgxpool.Pool, n Namespace) ([]Checkpoint, error) {
	rows, err := pool.Query(ctx, `SELECT org, namespace, seq, row_hash, rows_verified, prev_checkpoint, checkpoint_hash
		FROM loom.audit_checkpoints WHERE org = $1 AND namespace = $2 ORDER BY seq`, n.Org, n.Namespace)
	if err != nil {
		return nil, fmt.Errorf("read the audit checkpoints of %s/%s: %w", n.Org, n.Namespace, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Checkpoint, error) {
		var c Checkpoint
		err := r.Scan(&c.Org, &c.Namespace, &c.Seq, &c.RowHash, &c.RowsVerified, &c.Prev, &c.Hash)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the audit checkpoints of %s/%s: %w", n.Org, n.Namespace, err)
	}
	return out, nil
}

// LastCheckpoint is the namespace's latest checkpoint; ok is false when it has none.
func LastCheckpoint(ctx context.Context, pool *pgxpool.Pool, n Namespace) (c Checkpoint, ok bool, err error) {
	err = pool.QueryRow(ctx, `SELECT org, namespace, seq, row_hash, rows_verified, prev_checkpoint, checkpoint_hash
		FROM loom.audit_checkpoints WHERE org = $1 AND namespace = $2 ORDER BY seq DESC LIMIT 1`, n.Org, n.Namespace).
		Scan(&c.Org, &c.Namespace, &c.Seq, &c.RowHash, &c.RowsVerified, &c.Prev, &c.Hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("read the last audit checkpoint of %s/%s: %w", n.Org, n.Namespace, err)
	}
	return c, true, nil
}

// insertCheckpoint records c; a checkpoint already at its seq (another pass's) stands.
func insertCheckpoint(ctx context.Context, pool *pgxpool.Pool, c Checkpoint) error {
	_, err := pool.Exec(ctx, `INSERT INTO loom.audit_checkpoints (org, namespace, seq, row_hash, rows_verified, prev_checkpoint, checkpoint_hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`, c.Org, c.Namespace, c.Seq, c.RowHash, c.RowsVerified, c.Prev, c.Hash)
	if err != nil {
		return fmt.Errorf("record the audit checkpoint of %s/%s at seq %d: %w", c.Org, c.Namespace, c.Seq, err)
	}
	return nil
}

// Report is what a verification walked.
type Report struct {
	Namespaces, Rows, Legacy, Checkpoints int64
}

// Verify walks every chain in scope (org, and a namespace of it; empty: all) from its
// first row against its checkpoints, and returns the first broken link as a *Break.
func Verify(ctx context.Context, conn *ch.Conn, pool *pgxpool.Pool, org, namespace string) (Report, error) {
	var rep Report
	nss, err := Namespaces(ctx, conn, org, namespace)
	if err != nil {
		return rep, err
	}
	for _, n := range nss {
		maxPurge, err := MaxPurge(ctx, conn, n)
		if err != nil {
			return rep, err
		}
		cps, err := Checkpoints(ctx, pool, n)
		if err != nil {
			return rep, err
		}
		w := NewWalker(n.Org, n.Namespace, maxPurge, cps)
		var brk *Break
		err = EachRow(ctx, conn, n, 0, 0, func(r Row) error {
			if brk == nil {
				brk = w.Step(r)
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
		if brk == nil {
			brk = w.Finish()
		}
		rep.Namespaces++
		rep.Rows, rep.Legacy, rep.Checkpoints = rep.Rows+w.Rows, rep.Legacy+w.Legacy, rep.Checkpoints+w.CheckpointsMet
		if brk != nil {
			return rep, brk
		}
	}
	return rep, nil
}

// CheckpointPass verifies each chain past its last checkpoint, at most maxRows rows of
// a namespace, and records a checkpoint at the last row it verified. A broken link is
// not checkpointed over: it is returned (every namespace is still passed), and the
// next pass meets it again.
func CheckpointPass(ctx context.Context, conn *ch.Conn, pool *pgxpool.Pool, maxRows int) (checkpointed int, err error) {
	nss, err := Namespaces(ctx, conn, "", "")
	if err != nil {
		return 0, err
	}
	var breaks []error
	for _, n := range nss {
		ok, err := CheckpointNamespace(ctx, conn, pool, n, maxRows)
		var brk *Break
		switch {
		case errors.As(err, &brk):
			breaks = append(breaks, err)
		case err != nil:
			return checkpointed, err
		case ok:
			checkpointed++
		}
	}
	return checkpointed, errors.Join(breaks...)
}

// CheckpointNamespace verifies one chain past its last checkpoint (at most maxRows
// rows) and records a checkpoint at the last row verified; false when there was
// nothing new to checkpoint. A broken link is returned as a *Break.
func CheckpointNamespace(ctx context.Context, conn *ch.Conn, pool *pgxpool.Pool, n Namespace, maxRows int) (bool, error) {
	last, has, err := LastCheckpoint(ctx, pool, n)
	if err != nil {
		return false, err
	}
	maxPurge, err := MaxPurge(ctx, conn, n)
	if err != nil {
		return false, err
	}
	w := NewWalker(n.Org, n.Namespace, maxPurge, nil)
	from := uint64(0)
	if has {
		// The checkpointed row itself is read again: it must still hold its hash.
		w.From(last)
		from = uint64(last.Seq) - 1
	}
	var brk *Break
	// found: the checkpointed row was read again. Its seq may hold a row before it (in
	// op order), which the pass that checkpointed verified.
	found := !has
	lost := func() *Break {
		return w.broken(uint64(last.Seq), "the checkpointed row no longer holds its hash %s", short(last.RowHash))
	}
	err = EachRow(ctx, conn, n, from, maxRows, func(r Row) error {
		switch {
		case brk != nil:
		case !found && r.Seq == uint64(last.Seq):
			if r.RowHash == last.RowHash {
				found = true
				if Hash(r.PrevHash, r) != r.RowHash {
					brk = lost()
				}
			}
		case !found:
			brk = lost()
		default:
			brk = w.Step(r)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if brk == nil && !found {
		brk = lost()
	}
	if brk != nil {
		return false, brk
	}
	seq, hash := w.LastRow()
	if w.Rows == 0 || hash == "" {
		return false, nil
	}
	c := Checkpoint{Org: n.Org, Namespace: n.Namespace, Seq: int64(seq), RowHash: hash, RowsVerified: w.Rows}
	if has {
		c.Prev = last.Hash
	}
	c.Hash = CheckpointHash(c.Prev, c.Org, c.Namespace, c.Seq, c.RowHash)
	return true, insertCheckpoint(ctx, pool, c)
}
