package query

import (
	"context"
	"fmt"

	"github.com/loomplane/loom/internal/memrow"
)

// validate serves a hit only while its key's Postgres head is live, of the hit's type,
// active and holds the content its search document was built from; the value served is
// the head's. The first topK candidates are checked, the dropped ones are refilled once
// from the ranked remainder, and every drop counts in stale_dropped.
func (s *Service) validate(ctx context.Context, f filter, cands []candidate, topK int) ([]hitView, int, error) {
	hits := []hitView{}
	stale := 0
	first := cands[:min(topK, len(cands))]
	rest := cands[len(first):]
	for round := 0; round < 2 && len(first) > 0; round++ {
		heads, err := s.heads(ctx, f, first)
		if err != nil {
			return nil, 0, err
		}
		for _, c := range first {
			h, ok := heads[identityKey(c.agent, c.userID, c.sessionID, c.key)]
			if !ok || !h.Live() || h.Status != memrow.StatusActive || h.MemoryType != c.memoryType || h.ContentSHA256 != c.contentSHA256 {
				stale++
				continue
			}
			hits = append(hits, hitView{memoryView: viewOf(h), Score: c.score, Scores: map[string]float64{"vector": c.score}})
		}
		need := topK - len(hits)
		if need <= 0 {
			break
		}
		first, rest = rest[:min(need, len(rest))], rest[min(need, len(rest)):]
	}
	return hits, stale, nil
}

func identityKey(agent, user, session, key string) string {
	return agent + "\x00" + user + "\x00" + session + "\x00" + key
}

// heads reads the Postgres heads of the candidates' keys in one query.
func (s *Service) heads(ctx context.Context, f filter, cands []candidate) (map[string]*memrow.Row, error) {
	agents := make([]string, len(cands))
	users := make([]string, len(cands))
	sessions := make([]string, len(cands))
	keys := make([]string, len(cands))
	for i, c := range cands {
		agents[i], users[i], sessions[i], keys[i] = c.agent, c.userID, c.sessionID, c.key
	}
	rows, err := s.pool.Query(ctx, `SELECT m.row FROM loom.memory_current m
		JOIN unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS k(agent, user_id, session_id, memory_key)
		  ON m.agent = k.agent AND m.user_id = k.user_id AND m.session_id = k.session_id AND m.memory_key = k.memory_key
		WHERE m.org = $1 AND m.namespace = $2`, f.org, f.namespace, agents, users, sessions, keys)
	if err != nil {
		return nil, fmt.Errorf("read heads: %w", err)
	}
	defer rows.Close()
	out := make(map[string]*memrow.Row, len(cands))
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, err
		}
		r, err := decodeRow(raw)
		if err != nil {
			return nil, err
		}
		out[identityKey(r.Agent, r.UserID, r.SessionID, r.MemoryKey)] = r
	}
	return out, rows.Err()
}
