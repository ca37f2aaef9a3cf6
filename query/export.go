package query

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/learnings"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/snapshot"
)

// erasure.export is the subject-access export: every memory of one user across the
// org's namespaces the token reaches, each with every version of it the journal holds,
// then the user's conversation record there (every kept turn, opened, with the
// memories drawn from it, every session digest, and every rule about the agent the
// user supports in the learnings queue, with their quotes), read from the authority in one
// repeatable-read transaction and streamed as JSON Lines in the snapshot framing
// (internal/snapshot). An admin's call, on record in
// loom.read_audit. It is a read, so the read side serves it; it holds only the rows
// whose identity names the user, so nothing of another user's is in it.

// exportHeader is an export's first line.
type exportHeader struct {
	Kind        string    `json:"kind"`
	ExportID    string    `json:"export_id"`
	Org         string    `json:"org"`
	UserID      string    `json:"user_id"`
	GeneratedAt time.Time `json:"generated_at"`
	// Namespaces is nil when the export covers every namespace of the org.
	Namespaces []string `json:"namespaces"`
}

// exportMemory is one memory of the user: its key, and its versions oldest first; the
// last is its current state (a deleted memory's last version is its tombstone).
type exportMemory struct {
	Kind      string          `json:"kind"`
	Namespace string          `json:"namespace"`
	MemoryKey string          `json:"memory_key"`
	Agent     string          `json:"agent"`
	UserID    string          `json:"user_id"`
	SessionID string          `json:"session_id"`
	Versions  []exportVersion `json:"versions"`
}

// exportVersion is one committed revision of the memory.
type exportVersion struct {
	Seq       int64       `json:"seq"`
	Event     string      `json:"event"`
	Op        string      `json:"op"`
	Committed time.Time   `json:"committed_at"`
	Row       *memrow.Row `json:"row"`
}

// exportTurn is one kept turn of the user, as a snapshot's turn line with its namespace.
type exportTurn struct {
	Namespace string `json:"namespace"`
	snapshot.Turn
}

// exportDigest is one session digest of the user, with its namespace.
type exportDigest struct {
	Namespace string `json:"namespace"`
	snapshot.Digest
}

// exportLearning is one rule about the agent the user supports (the learnings queue),
// with the user's quotes alone, and its namespace.
type exportLearning struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	learnings.Opened
}

// Export opens erasure.export of userID.
func (s *Service) Export(ctx context.Context, p auth.Principal, userID string) (*Stream, error) {
	if err := p.RequireAdmin("a subject-access export"); err != nil {
		return nil, err
	}
	if err := memrow.ValidateIdentity("user_id", userID); err != nil {
		return nil, err
	}
	if err := p.RequireUser(userID, "a subject-access export"); err != nil {
		return nil, err
	}
	tx, err := s.readTx(ctx)
	if err != nil {
		return nil, err
	}
	h := exportHeader{Kind: snapshot.KindExport, ExportID: uuid.NewString(), Org: p.Org, UserID: userID, Namespaces: p.Namespaces}
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&h.GeneratedAt); err != nil {
		tx.Rollback(ctx)
		return nil, httperr.Store("opening the export", err)
	}
	h.GeneratedAt = h.GeneratedAt.UTC()
	st := &Stream{s: s, tx: tx, audit: readAudit{org: p.Org, op: "erasure.export", userID: userID, actor: p.Actor(), id: uuid.MustParse(h.ExportID)}}
	st.write = func(ctx context.Context, w io.Writer) (snapshot.End, error) { return s.writeExport(ctx, tx, h, w) }
	if err := s.startAudit(ctx, st.audit); err != nil {
		st.Close()
		return nil, httperr.Store("auditing the export", err)
	}
	return st, nil
}

// writeExport streams the user's journal, one line per memory.
func (s *Service) writeExport(ctx context.Context, tx pgx.Tx, h exportHeader, w io.Writer) (snapshot.End, error) {
	sw, err := snapshot.NewWriter(w, h)
	if err != nil {
		return snapshot.End{}, err
	}
	rows, err := tx.Query(ctx, `SELECT namespace, agent, session_id, memory_key, seq, event_type, op, committed_at, `+heads.Row+`
		FROM loom.memory_revisions WHERE org = $1 AND user_id = (SELECT loom.user_ref($1, $2)) AND ($3::text[] IS NULL OR namespace = ANY($3))
		ORDER BY namespace, agent, session_id, memory_key, seq`, h.Org, h.UserID, h.Namespaces)
	if err != nil {
		return snapshot.End{}, fmt.Errorf("read the user's journal: %w", err)
	}
	defer rows.Close()
	// The columns hold the references of the key, agent and session (migrations 171,
	// 173): they group a key's versions; the clear values are in each version's opened
	// row.
	var cur *exportMemory
	var curRef [3]string
	flush := func() error {
		if cur == nil {
			return nil
		}
		return sw.Write(cur)
	}
	for rows.Next() {
		var m exportMemory
		var v exportVersion
		var raw []byte
		var ref [3]string
		if err := rows.Scan(&m.Namespace, &ref[0], &ref[1], &ref[2], &v.Seq, &v.Event, &v.Op, &v.Committed, &raw); err != nil {
			return snapshot.End{}, fmt.Errorf("read the user's journal: %w", err)
		}
		if raw != nil {
			if v.Row, err = heads.Decode(raw); err != nil {
				return snapshot.End{}, err
			}
		}
		v.Committed = v.Committed.UTC()
		if cur == nil || cur.Namespace != m.Namespace || curRef != ref {
			if err := flush(); err != nil {
				return snapshot.End{}, err
			}
			m.Kind, m.UserID = snapshot.KindMemory, h.UserID
			cur, curRef = &m, ref
		}
		if cur.MemoryKey == "" && v.Row != nil {
			cur.Agent, cur.SessionID, cur.MemoryKey = v.Row.Agent, v.Row.SessionID, v.Row.MemoryKey
		}
		cur.Versions = append(cur.Versions, v)
	}
	if err := rows.Err(); err != nil {
		return snapshot.End{}, fmt.Errorf("read the user's journal: %w", err)
	}
	if err := flush(); err != nil {
		return snapshot.End{}, err
	}
	if err := s.writeExportedConversation(ctx, tx, h, sw); err != nil {
		return snapshot.End{}, err
	}
	return sw.Close()
}

// writeExportedConversation streams the user's turns, then their session digests.
func (s *Service) writeExportedConversation(ctx context.Context, tx pgx.Tx, h exportHeader, sw *snapshot.Writer) error {
	err := evidence.EachTurnOf(ctx, tx, h.Org, h.UserID, h.Namespaces, s.unwrapKey,
		func(ns string, o evidence.Opened, source string, memoryIDs []string) error {
			return sw.WriteRecord(exportTurn{Namespace: ns, Turn: snapshotTurn(o, source, memoryIDs)})
		})
	if err != nil {
		return err
	}
	err = evidence.EachDigestOf(ctx, tx, h.Org, h.UserID, h.Namespaces, s.unwrapKey, func(ns string, d evidence.OpenedDigest) error {
		return sw.WriteRecord(exportDigest{Namespace: ns, Digest: snapshotDigest(d)})
	})
	if err != nil {
		return err
	}
	// The rules about the agent the user said: their quotes are theirs.
	return learnings.EachOf(ctx, tx, h.Org, h.UserID, h.Namespaces, func(ns string, o learnings.Opened) error {
		return sw.WriteRecord(exportLearning{Kind: snapshot.KindLearning, Namespace: ns, Opened: o})
	})
}
