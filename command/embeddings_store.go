package command

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomplane/loom/internal/memrow"
)

// The write side's read of ClickHouse's loom.memory_embeddings: memory.set's peers
// when the namespace's search index does not hold them (set_3_judge.go).

// clickhousePeers is the peer read from memory_embeddings: one statement, identity
// predicates in PREWHERE, within LOOM_CH_READ_DEADLINE_MS (one that does not answer
// is 503 PROJECTION_BEHIND: peerReadError).
func (s *Service) clickhousePeers(ctx context.Context, q peerQuery) ([]peerDoc, error) {
	if s.cfg.PeerReadDeadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.PeerReadDeadline)
		defer cancel()
	}
	where := []string{"tombstone = 0", "embedding_dim > 0", "memory_type = ?", "status IN ('active', 'conflicted')",
		"memory_key != ?"}
	args := []any{q.vector, q.id.Org, q.id.Namespace, q.memoryType, q.id.MemoryKey}
	if q.readUserID != "" {
		where = append(where, "(user_id = ? OR pinned = 1)")
		args = append(args, q.readUserID)
	}
	args = append(args, s.cfg.PeerLimit)
	sql := fmt.Sprintf(`SELECT agent, user_id, session_id, memory_key, content_sha256, %s AS cosine
		FROM loom.memory_embeddings FINAL
		PREWHERE org = ? AND namespace = ?
		WHERE %s
		ORDER BY cosine DESC
		LIMIT ?`, s.ch.Caps.Dot("embedding"), strings.Join(where, " AND "))
	rows, err := s.ch.Query(s.ch.Ctx(ctx), sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var docs []peerDoc
	for rows.Next() {
		d := peerDoc{id: memrow.Identity{Org: q.id.Org, Namespace: q.id.Namespace}}
		if err := rows.Scan(&d.id.Agent, &d.id.UserID, &d.id.SessionID, &d.id.MemoryKey, &d.sha, &d.cosine); err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return docs, rows.Err()
}
