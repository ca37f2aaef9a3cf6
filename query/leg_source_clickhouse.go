package query

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/memrow"
)

// clickhouseLegs reads a namespace's legs from the projection's search tables
// (memory_embeddings, memory_chunks, memory_lexical): one statement per leg (three for
// lexical, whose statistics it reads first), the four legs concurrently.
type clickhouseLegs struct {
	ch    *ch.Conn
	k1, b float64 // BM25
}

func (c clickhouseLegs) store() string { return sourceClickHouse }

func (c clickhouseLegs) legs(ctx context.Context, q legQuery) (map[Leg][]legHit, error) {
	runs := []struct {
		leg Leg
		run func(context.Context, legQuery) ([]legHit, error)
	}{{LegVector, c.vector}, {LegChunk, c.chunk}, {LegLexical, c.lexical}, {LegKey, c.key}}
	out := make(map[Leg][]legHit, len(runs))
	var mu sync.Mutex
	var g errgroup.Group
	for _, r := range runs {
		g.Go(func() error {
			hits, err := r.run(ctx, q)
			if err != nil {
				return fmt.Errorf("%s leg: %w", r.leg, err)
			}
			mu.Lock()
			defer mu.Unlock()
			out[r.leg] = hits
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

func (c clickhouseLegs) scanHits(ctx context.Context, ns, q string, args []any, withCoverage bool) ([]legHit, error) {
	rows, err := c.ch.Query(c.ch.Ctx(ctx), q, args...)
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

// vector ranks the namespace's search documents by cosine to the query vector.
func (c clickhouseLegs) vector(ctx context.Context, lq legQuery) ([]legHit, error) {
	pre, where, args := lq.f.where(lq.ns, true)
	q := fmt.Sprintf(`SELECT %s, %s AS score FROM loom.memory_embeddings FINAL PREWHERE %s
		WHERE %s AND embedding_dim > 0 ORDER BY score DESC LIMIT ?`, identityCols, c.ch.Caps.Dot("embedding"), pre, where)
	return c.scanHits(ctx, lq.ns, q, append(append([]any{lq.vector}, args...), lq.limit), false)
}

// chunk ranks the windows of long values; only windows of the content a row's current
// search document holds are read, so a value rewritten since is not matched by its old
// windows.
func (c clickhouseLegs) chunk(ctx context.Context, lq legQuery) ([]legHit, error) {
	pre, where, args := lq.f.where(lq.ns, false)
	q := fmt.Sprintf(`SELECT %s, %s AS score FROM loom.memory_chunks FINAL PREWHERE %s
		WHERE %s AND embedding_dim > 0
		  AND (agent, user_id, session_id, memory_key, content_sha256) IN (
			SELECT agent, user_id, session_id, memory_key, content_sha256 FROM loom.memory_embeddings FINAL
			PREWHERE org = ? AND namespace = ? WHERE tombstone = 0)
		ORDER BY score DESC LIMIT ?`, identityCols, c.ch.Caps.Dot("embedding"), pre, where)
	args = append(append([]any{lq.vector}, args...), lq.f.org, lq.ns, lq.limit)
	return c.scanHits(ctx, lq.ns, q, args, false)
}

// lexical scores the namespace's rows with Okapi BM25 over their index terms. The
// document statistics (count, average length, each query term's document frequency)
// are read from the same table first, so they are exact whatever was replayed. The
// terms are ARRAY JOINed rather than read in a lambda: ClickHouse 18.16's lambdas
// cannot see a table's columns.
func (c clickhouseLegs) lexical(ctx context.Context, lq legQuery) ([]legHit, error) {
	if len(lq.terms) == 0 {
		return nil, nil
	}
	ctx = c.ch.Ctx(ctx)
	n, avgdl, df, err := c.lexicalStatistics(ctx, lq)
	if err != nil || n == 0 {
		return nil, err
	}
	terms := lq.terms
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
	pre, where, args := lq.f.where(lq.ns, true)
	q := fmt.Sprintf(`SELECT %s,
			sum(transform(term, ?, ?, 0.) * tf * %g / (tf + %g * (1 - %g + %g * doc_len / %g))) AS score,
			sum(transform(term, ?, ?, 0.)) AS coverage
		FROM loom.memory_lexical FINAL ARRAY JOIN terms AS term, tfs AS tf
		PREWHERE %s WHERE %s AND has(?, term)
		GROUP BY %s
		ORDER BY score DESC LIMIT ?`, identityCols, c.k1+1, c.k1, c.b, c.b, math.Max(avgdl, 1), pre, where, identityCols)
	all := append([]any{terms, idfs, terms, shares}, args...)
	all = append(all, terms, lq.limit)
	return c.scanHits(ctx, lq.ns, q, all, true)
}

// lexicalStatistics are the BM25 statistics of the rows the filter keeps: their count,
// their average length and each query term's document frequency.
func (c clickhouseLegs) lexicalStatistics(ctx context.Context, lq legQuery) (n uint64, avgdl float64, df map[string]float64, err error) {
	pre, where, args := lq.f.where(lq.ns, true)
	if err := c.ch.QueryRow(ctx, fmt.Sprintf(`SELECT count(), avg(doc_len) FROM loom.memory_lexical FINAL
		PREWHERE %s WHERE %s AND doc_len > 0`, pre, where), args...).Scan(&n, &avgdl); err != nil {
		return 0, 0, nil, fmt.Errorf("lexical statistics: %w", err)
	}
	if n == 0 {
		return 0, 0, nil, nil
	}
	rows, err := c.ch.Query(ctx, fmt.Sprintf(`SELECT term, count() FROM loom.memory_lexical FINAL ARRAY JOIN terms AS term
		PREWHERE %s WHERE %s AND doc_len > 0 AND has(?, term) GROUP BY term`, pre, where), append(args, lq.terms)...)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("lexical document frequencies: %w", err)
	}
	df = map[string]float64{}
	for rows.Next() {
		var t string
		var count uint64
		if err := rows.Scan(&t, &count); err != nil {
			rows.Close()
			return 0, 0, nil, err
		}
		df[t] = float64(count)
	}
	rows.Close()
	return n, avgdl, df, rows.Err()
}

// key finds rows whose key the query names: the key itself, or its words. The score is
// the share of the key's words the query holds (1 for the key verbatim).
func (c clickhouseLegs) key(ctx context.Context, lq legQuery) ([]legHit, error) {
	terms, verbatim := lq.terms, strings.TrimSpace(lq.text)
	if len(terms) == 0 {
		terms = []string{verbatim} // an empty array literal has no type on 18.16
	}
	pre, where, args := lq.f.where(lq.ns, true)
	q := fmt.Sprintf(`SELECT %s, if(memory_key = ?, 1.0, arraySum(arrayMap(k -> has(?, k), key_terms)) / greatest(length(key_terms), 1)) AS score
		FROM loom.memory_lexical FINAL PREWHERE %s WHERE %s AND (memory_key = ? OR hasAny(key_terms, ?))
		ORDER BY score DESC LIMIT ?`, identityCols, pre, where)
	all := append([]any{verbatim, terms}, args...)
	all = append(all, verbatim, terms, lq.limit)
	return c.scanHits(ctx, lq.ns, q, all, false)
}
