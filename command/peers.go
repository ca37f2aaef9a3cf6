package command

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/searchindex"
)

// peerQuery is what a write's peer read is narrowed to.
type peerQuery struct {
	id         memrow.Identity
	memoryType string
	vector     []float32
	readUserID string // a token bound to one user: peers are that user's rows, and pinned rows of anyone
	// headsFrom: a row the index finds below this cosine, of another value than sha,
	// decides nothing, so the verdict names it as the index has it and its head is
	// not read (0: every row's head is read).
	headsFrom float64
	sha       string
}

// peerDoc is a search document a peer read found, before its head is checked.
type peerDoc struct {
	id       memrow.Identity
	memoryID string // set by the index's read
	sha      string
	cosine   float64
}

// far reports whether a doc of the index's read is out of the verdict's reach.
func (q peerQuery) far(d peerDoc) bool {
	return q.headsFrom > 0 && d.memoryID != "" && d.cosine < q.headsFrom && d.sha != q.sha
}

// errPeersMoved sends a write to another round: the index dropped the namespace (past
// its memory budget) between the round's capture and its peer read, so the capture
// does not cover a read the ClickHouse path would now serve.
var errPeersMoved = errors.New("the namespace's peers moved from the index to ClickHouse since the capture")

// indexed reports whether the process's index serves the namespace's peer reads.
func (s *Service) indexed(org, ns string) bool {
	return s.index != nil && s.index.Held(searchindex.Space{Org: org, Namespace: ns})
}

// readPeers returns the rows of other keys nearest the write's value: read from the
// process's search index when the round captured its position (fromIndex), else from
// the search documents in ClickHouse, then checked against their Postgres heads, which
// are what the verdict judges. A document whose head moved on is left out: the
// admission's gap check covers what moved. A row of the index's read out of the
// verdict's reach (q.far) is named as the index has it, without its head: it decides
// nothing, and most writes have no peer in reach, so most skip the heads' round trip.
func (s *Service) readPeers(ctx context.Context, q peerQuery, fromIndex bool) ([]peer, error) {
	var docs []peerDoc
	var err error
	if fromIndex {
		docs, err = s.indexPeers(q)
	} else {
		docs, err = s.clickhousePeers(ctx, q)
	}
	if err != nil || len(docs) == 0 {
		return nil, err
	}
	var ids []memrow.Identity
	for _, d := range docs {
		if !q.far(d) {
			ids = append(ids, d.id)
		}
	}
	current := map[string]*memrow.Row{}
	if len(ids) > 0 {
		if current, err = heads.Many(ctx, s.pool, q.id.Org, q.id.Namespace, ids); err != nil {
			return nil, err
		}
	}
	now := s.now()
	var out []peer
	for _, d := range docs {
		if q.far(d) {
			out = append(out, peer{row: &memrow.Row{Identity: d.id, MemoryID: d.memoryID, MemoryType: q.memoryType,
				ContentSHA256: d.sha}, cosine: d.cosine})
			continue
		}
		h := current[heads.IdentityKey(d.id)]
		if h == nil || h.ContentSHA256 != d.sha || !isPeer(h, q, now) {
			continue
		}
		out = append(out, peer{row: h, cosine: d.cosine})
	}
	return out, nil
}

// indexPeers is the peer read from the process's search index.
func (s *Service) indexPeers(q peerQuery) ([]peerDoc, error) {
	found, _, err := s.index.Peers(searchindex.Space{Org: q.id.Org, Namespace: q.id.Namespace}, searchindex.PeerQuery{
		MemoryType: q.memoryType, MemoryKey: q.id.MemoryKey, ReadUserID: q.readUserID, Vector: q.vector,
		Limit: s.cfg.PeerLimit, Now: s.now()})
	if errors.Is(err, searchindex.ErrNotHeld) {
		return nil, errPeersMoved
	}
	docs := make([]peerDoc, len(found))
	for i, p := range found {
		docs[i] = peerDoc{id: memrow.Identity{Org: q.id.Org, Namespace: q.id.Namespace, Agent: p.Agent, UserID: p.UserID,
			SessionID: p.SessionID, MemoryKey: p.MemoryKey}, memoryID: p.MemoryID, sha: p.ContentSHA256, cosine: p.Cosine}
	}
	return docs, err
}

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

// isPeer is the peer rule, applied to a head: a served row of the same type under
// another key, in the writer's read scope unless pinned. The same key in another
// session is not a peer: markSameKey (admit.go) judges it.
func isPeer(h *memrow.Row, q peerQuery, now time.Time) bool {
	if !h.Served(now) || h.MemoryType != q.memoryType || h.MemoryKey == q.id.MemoryKey {
		return false
	}
	return q.readUserID == "" || h.UserID == q.readUserID || h.Pinned
}
