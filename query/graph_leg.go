package query

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// LegGraph is search's graph leg (the request's graph option).
const LegGraph Leg = "graph"

// Graph leg scores: a row naming an entity the query names, and a row reached over
// one open edge from one.
const (
	graphDirect = 1.0
	graphHop    = 0.5
)

// maxEntityWords bounds the words of an entity name the query is read for.
const maxEntityWords = 4

// queryEntityNames are the canonical names the query could name: every run of one to
// four of its words, as written and with the punctuation around it trimmed.
func queryEntityNames(query string) []string {
	words := strings.Fields(query)
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if c := memrow.EntityName(s); c != "" && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	for i := range words {
		for n := 1; n <= maxEntityWords && i+n <= len(words); n++ {
			gram := strings.Join(words[i:i+n], " ")
			add(gram)
			add(strings.TrimFunc(gram, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }))
		}
	}
	return out
}

// graphLeg finds the rows holding facts or edges of the named entities (the planner's,
// or every run of the query's words) and of their neighbours one open edge away, and
// keeps those search serves under the filter (their current search document holds
// the value that named them).
func (s *Service) graphLeg(ctx context.Context, f filter, ns string, names []string, limit int) ([]legHit, error) {
	if len(names) == 0 {
		return nil, nil
	}
	ctx = s.ch.Ctx(ctx)
	seeds, err := s.queryEntities(ctx, f, ns, names)
	if err != nil || len(seeds) == 0 {
		return nil, err
	}
	hop, err := s.neighbours(ctx, f, ns, seeds)
	if err != nil {
		return nil, err
	}
	reached := append(append([]string(nil), seeds...), hop...)
	direct := map[string]bool{}
	for _, n := range seeds {
		direct[n] = true
	}
	// The rows holding a fact or an edge of a reached entity, with the value that named it.
	type named struct {
		sha   string
		score float64
	}
	rowsByID := map[string]named{}
	note := func(id, sha string, score float64) {
		if cur, ok := rowsByID[id]; !ok || score > cur.score {
			rowsByID[id] = named{sha, score}
		}
	}
	for _, q := range []string{
		`SELECT subject, object, toString(memory_id), argMax(content_sha256, seq), argMax(user_id, seq)
			FROM loom.entity_triple_rows PREWHERE org = ? AND namespace = ? WHERE has(?, subject) OR has(?, object)
			GROUP BY subject, predicate, object, memory_id HAVING argMax(holds, seq) = 1`,
		`SELECT entity_a, entity_b, toString(memory_id), argMax(content_sha256, seq), argMax(user_id, seq)
			FROM loom.entity_edge_rows PREWHERE org = ? AND namespace = ? WHERE has(?, entity_a) OR has(?, entity_b)
			GROUP BY entity_a, entity_b, memory_id HAVING argMax(holds, seq) = 1`,
	} {
		err := s.ch.Each(ctx, q, []any{f.org, ns, reached, reached}, func(scan func(...any) error) error {
			var a, b, id, sha, user string
			if err := scan(&a, &b, &id, &sha, &user); err != nil {
				return err
			}
			if f.userID != "" && user != f.userID {
				return nil
			}
			score := graphHop
			if direct[a] || direct[b] {
				score = graphDirect
			}
			note(id, sha, score)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("graph rows: %w", err)
		}
	}
	if len(rowsByID) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(rowsByID))
	for id := range rowsByID {
		ids = append(ids, id)
	}
	pre, where, args := f.where(ns, true)
	q := fmt.Sprintf(`SELECT %s, memory_id FROM loom.memory_lexical FINAL PREWHERE %s
		WHERE %s AND has(?, toString(memory_id))`, identityCols, pre, where)
	var hits []legHit
	err = s.ch.Each(ctx, q, append(args, ids), func(scan func(...any) error) error {
		h := legHit{id: memrow.Identity{Namespace: ns}}
		var id uuid.UUID
		if err := scan(&h.id.Agent, &h.id.UserID, &h.id.SessionID, &h.id.MemoryKey, &h.contentSHA256, &h.memoryType, &id); err != nil {
			return err
		}
		if n, ok := rowsByID[id.String()]; ok && n.sha == h.contentSHA256 {
			h.score = n.score
			hits = append(hits, h)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("graph rows' documents: %w", err)
	}
	sortHits(hits)
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}

// queryEntities are the names among names the namespace's rows (within the read
// scope) named.
func (s *Service) queryEntities(ctx context.Context, f filter, ns string, names []string) ([]string, error) {
	q := `SELECT DISTINCT name FROM loom.entities FINAL PREWHERE org = ? AND namespace = ? WHERE has(?, name)`
	args := []any{f.org, ns, names}
	if f.userID != "" {
		q += ` AND user_id = ?`
		args = append(args, f.userID)
	}
	var out []string
	err := s.ch.Each(ctx, q, args, func(scan func(...any) error) error {
		var n string
		if err := scan(&n); err != nil {
			return err
		}
		out = append(out, n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("query entities: %w", err)
	}
	return out, nil
}

// neighbours are the entities one edge from seeds, over the edges open at the
// search's as_of (now by default).
func (s *Service) neighbours(ctx context.Context, f filter, ns string, seeds []string) ([]string, error) {
	at := "now()"
	if f.asOf != nil {
		at = fmt.Sprintf("toDateTime(%d)", f.asOf.Unix())
	}
	q := `SELECT entity_a, entity_b FROM loom.entity_edges PREWHERE org = ? AND namespace = ?
		WHERE has(?, entity_a) OR has(?, entity_b)
		GROUP BY entity_a, entity_b, opened_seq
		HAVING argMax(valid_from, seq) <= ` + at + ` AND (isNull(argMax(valid_to, seq)) OR argMax(valid_to, seq) > ` + at + `)`
	in := map[string]bool{}
	for _, n := range seeds {
		in[n] = true
	}
	seen := map[string]bool{}
	var out []string
	err := s.ch.Each(ctx, q, []any{f.org, ns, seeds, seeds}, func(scan func(...any) error) error {
		var a, b string
		if err := scan(&a, &b); err != nil {
			return err
		}
		for _, n := range []string{a, b} {
			if !in[n] && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("graph neighbours: %w", err)
	}
	return out, nil
}

// sortHits orders a leg's hits by score, best first, then by identity.
func sortHits(hits []legHit) {
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		return heads.IdentityKey(hits[i].id) < heads.IdentityKey(hits[j].id)
	})
}
