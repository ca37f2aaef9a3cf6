package query

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/learnings"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/snapshot"
)

// namespace.snapshot is a read of the authority, so the read side serves it: every
// head of the namespace as Postgres holds it at one generation (a repeatable-read
// transaction sees a commit's heads and its generation together or not at all),
// whatever ClickHouse has projected. The heads stream from one query through the
// connection as they are written out, so memory stays bounded however large the
// namespace is.

// Stream is a bulk read opened on the authority and ready to be written out: the
// checks passed, the audit row is written, and what goes out is fixed.
type Stream struct {
	s     *Service
	tx    pgx.Tx
	audit readAudit
	write func(ctx context.Context, w io.Writer) (snapshot.End, error)
}

// WriteTo writes the payload to w and completes the audit row. An error after the
// first byte leaves the payload without its end line, which a reader refuses.
func (st *Stream) WriteTo(ctx context.Context, w io.Writer) (snapshot.End, error) {
	end, err := st.write(ctx, w)
	if err != nil {
		return end, err
	}
	if err := st.s.completeAudit(ctx, st.audit, end); err != nil {
		return end, err
	}
	return end, nil
}

// WriteOut writes the payload to w, gzip-compressed when gz is set, and completes the
// audit row. It does not flush or close w.
func (st *Stream) WriteOut(ctx context.Context, w io.Writer, gz bool) (snapshot.End, error) {
	if !gz {
		return st.WriteTo(ctx, w)
	}
	zw := gzip.NewWriter(w)
	end, err := st.WriteTo(ctx, zw)
	if err == nil {
		err = zw.Close()
	}
	return end, err
}

// Close ends the stream's read transaction.
func (st *Stream) Close() { st.tx.Rollback(context.WithoutCancel(context.Background())) }

// ID is the snapshot's (or the export's) id, as its header and audit row name it.
func (st *Stream) ID() string { return st.audit.id.String() }

// Snapshot opens namespace.snapshot of ns: an admin token's whole namespace. A token
// bound to one user cannot take one (403): a snapshot is every user's rows.
func (s *Service) Snapshot(ctx context.Context, p auth.Principal, ns string) (*Stream, error) {
	if err := p.Namespace(ns); err != nil {
		return nil, err
	}
	if err := p.RequireAdmin("a namespace snapshot"); err != nil {
		return nil, err
	}
	if err := p.RequireEveryUser("a namespace snapshot"); err != nil {
		return nil, err
	}
	tx, err := s.readTx(ctx)
	if err != nil {
		return nil, err
	}
	h := snapshot.Header{Kind: snapshot.KindSnapshot, Format: snapshot.Format, SnapshotID: uuid.NewString(), Org: p.Org, Namespace: ns,
		Blacklist: []string{}}
	err = func() error {
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&h.TakenAt); err != nil {
			return err
		}
		if h.Generation, err = generations.Read(ctx, tx, p.Org, ns); err != nil {
			return err
		}
		var raw []byte
		err := tx.QueryRow(ctx, `SELECT config FROM loom.namespaces WHERE org = $1 AND namespace = $2`, p.Org, ns).Scan(&raw)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		h.Config = json.RawMessage(raw)
		rows, err := tx.Query(ctx, `SELECT pattern FROM loom.blacklist WHERE org = $1 AND namespace = $2 ORDER BY pattern`, p.Org, ns)
		if err != nil {
			return err
		}
		patterns, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		h.Blacklist = append(h.Blacklist, patterns...)
		h.Allowlist, err = allowlistOf(ctx, tx, p.Org, ns)
		return err
	}()
	if err != nil {
		tx.Rollback(ctx)
		return nil, httperr.Store("reading the namespace at one generation", err)
	}
	h.TakenAt = h.TakenAt.UTC()
	st := &Stream{s: s, tx: tx, audit: readAudit{org: p.Org, op: "namespace.snapshot", namespace: ns, actor: p.Actor(),
		id: uuid.MustParse(h.SnapshotID), generation: h.Generation}}
	st.write = func(ctx context.Context, w io.Writer) (snapshot.End, error) { return s.writeSnapshot(ctx, tx, h, w) }
	if err := s.startAudit(ctx, st.audit); err != nil {
		st.Close()
		return nil, httperr.Store("auditing the snapshot", err)
	}
	return st, nil
}

// readTx begins the repeatable-read transaction a bulk read runs in, with no statement
// timeout: a large namespace streams for as long as its reader takes it.
func (s *Service) readTx(ctx context.Context) (pgx.Tx, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, httperr.Store("opening the read", err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0`); err != nil {
		tx.Rollback(ctx)
		return nil, httperr.Store("opening the read", err)
	}
	return tx, nil
}

// writeSnapshot streams the namespace's live heads, in identity order.
func (s *Service) writeSnapshot(ctx context.Context, tx pgx.Tx, h snapshot.Header, w io.Writer) (snapshot.End, error) {
	sw, err := snapshot.NewWriter(w, h)
	if err != nil {
		return snapshot.End{}, err
	}
	err = heads.EachLive(ctx, tx, h.Org, h.Namespace, func(row *memrow.Row) error {
		if !row.Live(h.TakenAt) {
			return nil // expired: reads hide it, and the sweep deletes it
		}
		return sw.Write(snapshot.Memory{Kind: snapshot.KindMemory, Row: row})
	})
	if err != nil {
		return snapshot.End{}, err
	}
	if err := s.writeConversation(ctx, tx, h, sw); err != nil {
		return snapshot.End{}, err
	}
	return sw.Close()
}

// writeConversation streams the namespace's conversation record after its memories:
// every kept turn, with the memories drawn from it, then each session's newest
// digest, then the learnings queue's candidates with their supporters, read in the
// snapshot's transaction. The verbatim chunks are not written: a
// restore cuts them again from the turns, as their write cut them.
func (s *Service) writeConversation(ctx context.Context, tx pgx.Tx, h snapshot.Header, sw *snapshot.Writer) error {
	err := evidence.EachTurn(ctx, tx, h.Org, h.Namespace, s.unwrapKey, func(o evidence.Opened, source string, memoryIDs []string) error {
		return sw.WriteRecord(snapshotTurn(o, source, memoryIDs))
	})
	if err != nil {
		return err
	}
	digests, err := evidence.NewestDigests(ctx, tx, evidence.Scope{Org: h.Org, Namespace: h.Namespace}, math.MaxInt32, s.unwrapKey)
	if err != nil {
		return err
	}
	for _, d := range digests {
		if err := sw.WriteRecord(snapshotDigest(d)); err != nil {
			return err
		}
	}
	return learnings.EachIn(ctx, tx, h.Org, h.Namespace, func(o learnings.Opened) error {
		return sw.WriteRecord(snapshot.Learning{Kind: snapshot.KindLearning, Opened: o})
	})
}

// snapshotTurn is a kept turn's line, as a snapshot and an export carry it.
func snapshotTurn(o evidence.Opened, source string, memoryIDs []string) snapshot.Turn {
	return snapshot.Turn{Kind: snapshot.KindTurn, TurnID: o.TurnID, Agent: o.Agent, UserID: o.UserID,
		SessionID: o.SessionID, Role: o.Role, Speaker: o.Speaker, MessageIndex: o.MessageIndex, OccurredAt: o.OccurredAt.UTC(),
		Source: source, Text: o.Text, MemoryIDs: memoryIDs}
}

// snapshotDigest is a session digest's line, as a snapshot and an export carry it.
func snapshotDigest(d evidence.OpenedDigest) snapshot.Digest {
	return snapshot.Digest{Kind: snapshot.KindDigest, UserID: d.UserID, SessionID: d.SessionID, WindowEnd: d.WindowEnd,
		Turns: d.Turns, Model: d.Model, CreatedAt: d.CreatedAt.UTC(), Text: d.Text}
}

// snapshotDeadline bounds how long one bulk read may stream.
const snapshotDeadline = time.Hour

// allowlistOf reads a namespace's conflict allowlist (command/conflict_allowlist.go) for
// its snapshot: each pair's memory ids in order, the oldest pair first.
func allowlistOf(ctx context.Context, tx pgx.Tx, org, ns string) ([][2]string, error) {
	rows, err := tx.Query(ctx, `SELECT memory_a::text, memory_b::text FROM loom.conflict_allowlist
		WHERE org = $1 AND namespace = $2 ORDER BY added_at, memory_a, memory_b`, org, ns)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var pair [2]string
		err := r.Scan(&pair[0], &pair[1])
		return pair, err
	})
}
