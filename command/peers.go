package command

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// peerQuery is what a write's peer read is narrowed to.
type peerQuery struct {
	id         memrow.Identity
	memoryType string
	vector     []float32
	readUserID string // a token bound to one user: peers are that user's rows, and pinned rows of anyone
}

// readPeers returns the rows of other keys nearest the write's value: read from the
// search documents in ClickHouse (one statement, identity predicates in PREWHERE), then
// checked against their Postgres heads, which are what the verdict judges. A document
// whose head moved on is left out: the admission's gap check covers what moved.
//
// ClickHouse gets LOOM_CH_READ_DEADLINE_MS to answer; one that does not (down or
// frozen) is answered as the seeds say of a semantic admission ClickHouse cannot
// serve: 503 PROJECTION_BEHIND (peersUnavailable).
func (s *Service) readPeers(ctx context.Context, q peerQuery) ([]peer, error) {
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
	docs, err := s.peerDocs(ctx, sql, args, q)
	if err != nil {
		return nil, peersUnavailable("reading the write's peers", err)
	}
	if len(docs) == 0 {
		return nil, nil
	}
	ids := make([]memrow.Identity, len(docs))
	for i, d := range docs {
		ids[i] = d.id
	}
	current, err := heads.Many(ctx, s.pool, q.id.Org, q.id.Namespace, ids)
	if err != nil {
		return nil, httperr.Store("checking the write's peers against their heads", err)
	}
	now := s.now()
	var out []peer
	for _, d := range docs {
		h := current[heads.IdentityKey(d.id)]
		if h == nil || h.ContentSHA256 != d.sha || !isPeer(h, q, now) {
			continue
		}
		out = append(out, peer{row: h, cosine: d.cosine})
	}
	return out, nil
}

// peerDoc is a search document a peer read found.
type peerDoc struct {
	id     memrow.Identity
	sha    string
	cosine float64
}

// peerDocs runs the peer read's statement within LOOM_CH_READ_DEADLINE_MS.
func (s *Service) peerDocs(ctx context.Context, sql string, args []any, q peerQuery) ([]peerDoc, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.PeerReadDeadline)
	defer cancel()
	var docs []peerDoc
	err := s.ch.Each(s.ch.Ctx(ctx), sql, args, func(scan func(...any) error) error {
		d := peerDoc{id: memrow.Identity{Org: q.id.Org, Namespace: q.id.Namespace}}
		if err := scan(&d.id.Agent, &d.id.UserID, &d.id.SessionID, &d.id.MemoryKey, &d.sha, &d.cosine); err != nil {
			return err
		}
		docs = append(docs, d)
		return nil
	})
	return docs, err
}

// isPeer is the peer rule, applied to a head: a served row of the same type under
// another key, in the writer's read scope unless pinned. The same key in another
// session is not a peer: markSameKey (admit.go) judges it.
func isPeer(h *memrow.Row, q peerQuery, now time.Time) bool {
	if !h.Served(now) || h.MemoryType != q.memoryType || h.MemoryKey == q.id.MemoryKey {
		return false
	}
	return q.readUserID == "" || h.UserID == q.readUserID || h.Pinned
}
