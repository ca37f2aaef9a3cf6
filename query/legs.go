package query

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/memrow"
)

// filter is what a search (or a list) is narrowed to; empty fields do not narrow.
type filter struct {
	org                      string
	agent, userID, sessionID string
	memoryType               string
	tags                     []string
	tagsAny                  bool
	statuses                 []memrow.Status
	asOf                     *time.Time
	// expiresAt is when expiry is judged (nil: now): a listing of the namespace as it
	// was at a past time judges it then.
	expiresAt *time.Time
	// withDeleted keeps deleted and expired rows: a recovery listing's.
	withDeleted bool
}

// noUser is the user filter of a token bound to one user asking for another: it
// matches no row (and no text column holds a NUL).
const noUser = "\x00none"

// scopedUser is a filter's user_id under the token's read scope: a token bound to one
// user reads that user's rows; another user's rows are absent to it, not forbidden.
func scopedUser(p auth.Principal, userID string) string {
	switch {
	case p.ReadUserID == "":
		return userID
	case userID != "" && userID != p.ReadUserID:
		return noUser
	}
	return p.ReadUserID
}

// where builds the shared predicates of a leg over one namespace: identity columns in
// PREWHERE, so only the namespace's granules are read, and the row state search never
// serves in WHERE. validate checks all of it again on the Postgres head.
func (f filter) where(ns string, tagsColumn bool) (prewhere, where string, args []any) {
	pre := []string{"org = ?", "namespace = ?"}
	args = []any{f.org, ns}
	for _, p := range []struct{ col, v string }{{"agent", f.agent}, {"user_id", f.userID}, {"session_id", f.sessionID}} {
		if p.v != "" {
			pre = append(pre, p.col+" = ?")
			args = append(args, p.v)
		}
	}
	at := "now()"
	if f.asOf != nil {
		at = fmt.Sprintf("toDateTime(%d)", f.asOf.Unix())
	}
	expires := "now()"
	if f.expiresAt != nil {
		expires = fmt.Sprintf("toDateTime(%d)", f.expiresAt.Unix())
	}
	w := []string{"tombstone = 0", "(expires_at IS NULL OR expires_at > " + expires + ")", "sensitivity != 'high'", "has(?, status)",
		"(valid_to IS NULL OR valid_to > " + at + ")"}
	if f.withDeleted {
		w = w[2:]
	}
	statuses := make([]string, len(f.statuses))
	for i, st := range f.statuses {
		statuses[i] = string(st)
	}
	args = append(args, statuses)
	if f.memoryType != "" {
		w = append(w, "memory_type = ?")
		args = append(args, f.memoryType)
	}
	if len(f.tags) > 0 && tagsColumn {
		if f.tagsAny {
			w = append(w, "hasAny(tags, ?)")
		} else {
			w = append(w, "hasAll(tags, ?)")
		}
		args = append(args, f.tags)
	}
	return strings.Join(pre, " AND "), strings.Join(w, " AND "), args
}

func (s *Service) scanHits(ctx context.Context, ns, q string, args []any, withCoverage bool) ([]legHit, error) {
	rows, err := s.ch.Query(s.ch.Ctx(ctx), q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []legHit
	for rows.Next() {
		h := legHit{id: memrow.Identity{Namespace: ns}}
		dest := []any{&h.id.Agent, &h.id.UserID, &h.id.SessionID, &h.id.MemoryKey, &h.contentSHA256, &h.memoryType, &h.score}
		if withCoverage {
			dest = append(dest, &h.coverage)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

const identityCols = "agent, user_id, session_id, memory_key, content_sha256, memory_type"

// vectorLeg ranks the namespace's search documents by cosine to the query vector.
func (s *Service) vectorLeg(ctx context.Context, f filter, ns string, vec []float32, limit int) ([]legHit, error) {
	pre, where, args := f.where(ns, true)
	q := fmt.Sprintf(`SELECT %s, %s AS score FROM loom.memory_embeddings FINAL PREWHERE %s
		WHERE %s AND embedding_dim > 0 ORDER BY score DESC LIMIT ?`, identityCols, s.ch.Caps.Dot("embedding"), pre, where)
	return s.scanHits(ctx, ns, q, append(append([]any{vec}, args...), limit), false)
}

// chunkLeg ranks the windows of long values; only windows of the content a row's
// current search document holds are read, so a value rewritten since is not matched
// by its old windows.
func (s *Service) chunkLeg(ctx context.Context, f filter, ns string, vec []float32, limit int) ([]legHit, error) {
	pre, where, args := f.where(ns, false)
	q := fmt.Sprintf(`SELECT %s, %s AS score FROM loom.memory_chunks FINAL PREWHERE %s
		WHERE %s AND embedding_dim > 0
		  AND (agent, user_id, session_id, memory_key, content_sha256) IN (
			SELECT agent, user_id, session_id, memory_key, content_sha256 FROM loom.memory_embeddings FINAL
			PREWHERE org = ? AND namespace = ? WHERE tombstone = 0)
		ORDER BY score DESC LIMIT ?`, identityCols, s.ch.Caps.Dot("embedding"), pre, where)
	args = append(append([]any{vec}, args...), f.org, ns, limit)
	return s.scanHits(ctx, ns, q, args, false)
}

// lexicalLeg scores the namespace's rows with Okapi BM25 over their index terms. The
// document statistics (count, average length, each query term's document frequency)
// are read from the same table first, so they are exact whatever was replayed. The
// terms are ARRAY JOINed rather than read in a lambda: ClickHouse 18.16's lambdas
// cannot see a table's columns.
func (s *Service) lexicalLeg(ctx context.Context, f filter, ns string, terms []string, limit int) ([]legHit, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	pre, where, args := f.where(ns, true)
	ctx = s.ch.Ctx(ctx)
	var n uint64
	var avgdl float64
	if err := s.ch.QueryRow(ctx, fmt.Sprintf(`SELECT count(), avg(doc_len) FROM loom.memory_lexical FINAL
		PREWHERE %s WHERE %s AND doc_len > 0`, pre, where), args...).Scan(&n, &avgdl); err != nil {
		return nil, fmt.Errorf("lexical statistics: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	rows, err := s.ch.Query(ctx, fmt.Sprintf(`SELECT term, count() FROM loom.memory_lexical FINAL ARRAY JOIN terms AS term
		PREWHERE %s WHERE %s AND doc_len > 0 AND has(?, term) GROUP BY term`, pre, where), append(args, terms)...)
	if err != nil {
		return nil, fmt.Errorf("lexical document frequencies: %w", err)
	}
	df := map[string]float64{}
	for rows.Next() {
		var t string
		var c uint64
		if err := rows.Scan(&t, &c); err != nil {
			rows.Close()
			return nil, err
		}
		df[t] = float64(c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	idfs := make([]float64, len(terms))
	shares := make([]float64, len(terms)) // each term's share of the query's total idf
	total := 0.0
	for i, t := range terms {
		idfs[i] = math.Log(1 + (float64(n)-df[t]+0.5)/(df[t]+0.5))
		total += idfs[i]
	}
	for i := range terms {
		shares[i] = idfs[i] / total
	}
	k1, b := s.cfg.BM25K1, s.cfg.BM25B
	q := fmt.Sprintf(`SELECT %s,
			sum(transform(term, ?, ?, 0.) * tf * %g / (tf + %g * (1 - %g + %g * doc_len / %g))) AS score,
			sum(transform(term, ?, ?, 0.)) AS coverage
		FROM loom.memory_lexical FINAL ARRAY JOIN terms AS term, tfs AS tf
		PREWHERE %s WHERE %s AND has(?, term)
		GROUP BY %s
		ORDER BY score DESC LIMIT ?`, identityCols, k1+1, k1, b, b, math.Max(avgdl, 1), pre, where, identityCols)
	all := append([]any{terms, idfs, terms, shares}, args...)
	all = append(all, terms, limit)
	return s.scanHits(ctx, ns, q, all, true)
}

// keyLeg finds rows whose key the query names: the key itself, or its words. The score
// is the share of the key's words the query holds (1 for the key verbatim).
func (s *Service) keyLeg(ctx context.Context, f filter, ns, query string, terms []string, limit int) ([]legHit, error) {
	if len(terms) == 0 {
		terms = []string{strings.TrimSpace(query)} // an empty array literal has no type on 18.16
	}
	pre, where, args := f.where(ns, true)
	q := fmt.Sprintf(`SELECT %s, if(memory_key = ?, 1.0, arraySum(arrayMap(k -> has(?, k), key_terms)) / greatest(length(key_terms), 1)) AS score
		FROM loom.memory_lexical FINAL PREWHERE %s WHERE %s AND (memory_key = ? OR hasAny(key_terms, ?))
		ORDER BY score DESC LIMIT ?`, identityCols, pre, where)
	all := append([]any{strings.TrimSpace(query), terms}, args...)
	all = append(all, strings.TrimSpace(query), terms, limit)
	return s.scanHits(ctx, ns, q, all, false)
}
