package query

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/httperr"
)

// namespace.audit reads a namespace's audit rows from ClickHouse, behind the barrier,
// with the hashes that chain them (internal/auditchain) and the namespace's latest
// checkpoint, so an auditor can check the chain themselves. Hash-only rows: no value.
// An admin token that reaches every user's rows reads them: the trail names every
// writer of the namespace.

const (
	auditPageDefault = 100
	auditPageMax     = 1000
	// auditRowsPerSeq is the most rows a seq holds: its record's revision and the write
	// the record's note describes (events.AuditNote).
	auditRowsPerSeq = 2
)

// auditRowView is one audit row as namespace.audit answers it.
type auditRowView struct {
	Seq           uint64    `json:"seq"`
	Op            string    `json:"op"`
	EventType     string    `json:"event_type"`
	OccurredAt    time.Time `json:"occurred_at"`
	Actor         string    `json:"actor"`
	Agent         string    `json:"agent"`
	UserID        string    `json:"user_id"`
	SessionID     string    `json:"session_id"`
	MemoryKey     string    `json:"memory_key"`
	MemoryID      string    `json:"memory_id"`
	Version       uint64    `json:"version"`
	ContentSHA256 string    `json:"content_sha256"`
	SourceClass   string    `json:"source_class"`
	Status        string    `json:"status"`
	RequestID     string    `json:"request_id"`
	PrevHash      string    `json:"prev_hash"`
	RowHash       string    `json:"row_hash"`
	// Detail is a write's own row's account (events.AuditNote); absent on a revision's.
	Detail json.RawMessage `json:"detail,omitempty"`
}

// auditCheckpointView is the namespace's latest checkpoint.
type auditCheckpointView struct {
	Seq            int64  `json:"seq"`
	RowHash        string `json:"row_hash"`
	CheckpointHash string `json:"checkpoint_hash"`
}

type auditAnswer struct {
	Namespace    string               `json:"namespace"`
	Rows         []auditRowView       `json:"rows"`
	NextAfterSeq *uint64              `json:"next_after_seq"`
	Checkpoint   *auditCheckpointView `json:"checkpoint"`
	Barrier      Passed               `json:"barrier"`
}

// auditCall is namespace.audit's query string.
type auditCall struct {
	namespace, afterSeq, limit string
}

func (s *Service) namespaceAudit(ctx context.Context, p auth.Principal, r auditCall) (*auditAnswer, error) {
	if err := p.RequireAdmin("reading a namespace's audit trail"); err != nil {
		return nil, err
	}
	if err := p.RequireEveryUser("reading a namespace's audit trail"); err != nil {
		return nil, err
	}
	after, limit := uint64(0), auditPageDefault
	if r.afterSeq != "" {
		n, err := strconv.ParseUint(r.afterSeq, 10, 64)
		if err != nil {
			return nil, httperr.Validation("after_seq", "after_seq must be a whole number >= 0")
		}
		after = n
	}
	if r.limit != "" {
		n, err := strconv.Atoi(r.limit)
		if err != nil || n < 1 || n > auditPageMax {
			return nil, httperr.Validation("limit", "limit must be between 1 and "+strconv.Itoa(auditPageMax))
		}
		limit = n
	}
	passed, err := s.barrier.Wait(ctx, p.Org, []string{r.namespace})
	if err != nil {
		return nil, err
	}
	ans := &auditAnswer{Namespace: r.namespace, Rows: []auditRowView{}, Barrier: passed}
	err = s.ch.Each(s.ch.Ctx(ctx), `SELECT seq, op, event_type, occurred_at, actor, agent, user_id, session_id, memory_key,
		toString(memory_id), version, content_sha256, source_class, status, request_id, prev_hash, row_hash, detail
		FROM `+ch.Database+`.audit_log FINAL WHERE org = ? AND namespace = ? AND seq > ? ORDER BY seq, op LIMIT ?`,
		[]any{p.Org, r.namespace, after, uint64(limit + auditRowsPerSeq)}, func(scan func(...any) error) error {
			var v auditRowView
			var detail string
			if err := scan(&v.Seq, &v.Op, &v.EventType, &v.OccurredAt, &v.Actor, &v.Agent, &v.UserID, &v.SessionID, &v.MemoryKey,
				&v.MemoryID, &v.Version, &v.ContentSHA256, &v.SourceClass, &v.Status, &v.RequestID, &v.PrevHash, &v.RowHash, &detail); err != nil {
				return err
			}
			if detail != "" {
				v.Detail = json.RawMessage(detail)
			}
			ans.Rows = append(ans.Rows, v)
			return nil
		})
	if err != nil {
		return nil, chUnavailable("reading the namespace's audit rows", err)
	}
	if len(ans.Rows) > limit {
		// A page ends with the whole of its last seq, so after_seq never skips a row.
		end := limit
		for end < len(ans.Rows) && ans.Rows[end].Seq == ans.Rows[limit-1].Seq {
			end++
		}
		if end < len(ans.Rows) {
			ans.Rows = ans.Rows[:end]
			next := ans.Rows[end-1].Seq
			ans.NextAfterSeq = &next
		}
	}
	c, ok, err := auditchain.LastCheckpoint(ctx, s.pool, auditchain.Namespace{Org: p.Org, Namespace: r.namespace})
	if err != nil {
		return nil, httperr.Store("reading the namespace's audit checkpoint", err)
	}
	if ok {
		ans.Checkpoint = &auditCheckpointView{Seq: c.Seq, RowHash: c.RowHash, CheckpointHash: c.Hash}
	}
	return ans, nil
}
