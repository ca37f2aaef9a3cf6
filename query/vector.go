package query

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/memrow"
)

// filter is what a search is narrowed to; empty fields do not narrow.
type filter struct {
	org, namespace           string
	agent, userID, sessionID string
	memoryType               string
}

// candidate is a search document the vector leg ranked.
type candidate struct {
	identity      memrow.Identity
	memoryID      string
	version       int64
	memoryType    string
	contentSHA256 string
	score         float64
}

// vectorLeg ranks the namespace's live search documents by cosine to vec: one
// statement, identity predicates in PREWHERE so only the namespace's granules are read.
// Vectors are stored normalised, so cosine is a dot product.
func (s *Service) vectorLeg(ctx context.Context, f filter, vec []float32, limit int) ([]candidate, error) {
	score := s.ch.Caps.Dot("embedding")
	prewhere := []string{"org = ?", "namespace = ?"}
	args := []any{vec, f.org, f.namespace}
	for _, p := range []struct{ col, v string }{{"agent", f.agent}, {"user_id", f.userID}, {"session_id", f.sessionID}} {
		if p.v != "" {
			prewhere = append(prewhere, p.col+" = ?")
			args = append(args, p.v)
		}
	}
	// What search never serves is filtered in the scan; validation checks it again on
	// the Postgres head, which is the authority.
	where := "tombstone = 0 AND embedding_dim > 0 AND status IN ('active', 'conflicted') AND sensitivity != 'high'" +
		" AND (expires_at IS NULL OR expires_at > now()) AND (valid_to IS NULL OR valid_to > now())"
	if f.memoryType != "" {
		where += " AND memory_type = ?"
		args = append(args, f.memoryType)
	}
	args = append(args, limit)
	q := fmt.Sprintf(`SELECT agent, user_id, session_id, memory_key, memory_id, version, memory_type, content_sha256, %s AS score
		FROM loom.memory_embeddings FINAL
		PREWHERE %s
		WHERE %s
		ORDER BY score DESC, memory_key
		LIMIT ?`, score, strings.Join(prewhere, " AND "), where)
	rows, err := s.ch.Query(s.ch.Ctx(ctx), q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []candidate
	for rows.Next() {
		var c candidate
		var id uuid.UUID
		var version uint64
		c.identity.Org, c.identity.Namespace = f.org, f.namespace
		if err := rows.Scan(&c.identity.Agent, &c.identity.UserID, &c.identity.SessionID, &c.identity.MemoryKey, &id, &version, &c.memoryType, &c.contentSHA256, &c.score); err != nil {
			return nil, err
		}
		c.memoryID, c.version = id.String(), int64(version)
		out = append(out, c)
	}
	return out, rows.Err()
}
