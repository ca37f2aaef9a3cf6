package query

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/knowledge/index"
	"github.com/loomplane/loom/knowledge/store"
)

// SearchRequest is knowledge.search's body.
type SearchRequest struct {
	Query        string   `json:"query"`
	Limit        int      `json:"limit,omitempty"` // default 10, at most 100
	SourcePrefix string   `json:"source_prefix,omitempty"`
	Formats      []string `json:"formats,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	// UpdatedAfter and UpdatedBefore keep the chunks of versions written after and
	// before these times (RFC 3339), each excluded. Strings, so a bad one is refused
	// naming its field.
	UpdatedAfter  string `json:"updated_after,omitempty"`
	UpdatedBefore string `json:"updated_before,omitempty"`
	// UserID narrows an unbound token's search to the namespace's documents and this
	// user's (readUsers); a token bound to a user searches those of its user.
	UserID string `json:"user_id,omitempty"`
}

// Hit is one chunk a search answers.
type Hit struct {
	SourceURI   string    `json:"source_uri"`
	DocID       string    `json:"doc_id"`
	Version     int64     `json:"version"`
	Ordinal     int       `json:"ordinal"`
	HeadingPath []string  `json:"heading_path,omitempty"`
	Kind        string    `json:"kind"`
	Text        string    `json:"text"`
	Title       string    `json:"title"`
	Format      string    `json:"format"`
	Tags        []string  `json:"tags"`
	UserID      string    `json:"user_id,omitempty"` // the document's user (absent: the namespace's)
	UpdatedAt   time.Time `json:"updated_at"`        // when its version was written
	Score       float64   `json:"score"`
	Lexical     float64   `json:"lexical"`
	Vector      float64   `json:"vector"`
}

// SearchAnswer is a search's page. StaleDropped counts the candidates the heads
// refused (a chunk of a version the head no longer serves, of a deleted source, or of
// a source with no head).
type SearchAnswer struct {
	Hits         []Hit `json:"hits"`
	StaleDropped int   `json:"stale_dropped"`
}

// Search limits.
const (
	MaxSearchLimit = 100
	MaxQueryBytes  = 4096
)

// search is knowledge.search: the chunk index's hybrid pool, after the index has
// applied every record the namespace committed before the search, checked against the
// heads in one Postgres read before it is cut to the page. A full pool that lost
// candidates to the check is fetched once more, twice as deep, with a second read.
// What cannot reach the heads fails closed: 503 POSTGRES_UNAVAILABLE.
func (s *Service) search(ctx context.Context, p auth.Principal, ns string, req *SearchRequest) (*SearchAnswer, error) {
	switch {
	case req.Query == "":
		return nil, httperr.Validation("query", "query is required")
	case len(req.Query) > MaxQueryBytes:
		return nil, httperr.Validation("query", fmt.Sprintf("query is over %d bytes", MaxQueryBytes))
	case req.Limit < 0 || req.Limit > MaxSearchLimit:
		return nil, httperr.Validation("limit", fmt.Sprintf("limit is 1 to %d", MaxSearchLimit))
	}
	f, err := searchFilter(req)
	if err != nil {
		return nil, err
	}
	f.Users = readUsers(p, req.UserID)
	limit := req.Limit
	if limit == 0 {
		limit = 10
	}
	gen, err := generations.Read(ctx, s.pool, p.Org, ns)
	if err != nil {
		return nil, httperr.Store("reading the namespace's generation", err)
	}
	wctx, cancel := context.WithTimeout(ctx, s.wait)
	err = s.index.WaitFor(wctx, p.Org, ns, gen)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, (&httperr.Error{Status: http.StatusServiceUnavailable, Code: httperr.CodeProjectionBehind, Retryable: true,
			Message: "the knowledge index has not applied what the namespace committed before this search; retry"}).
			With("generation", gen).With("index_position", s.index.Position(p.Org, ns))
	}
	if s.index.Chunks(p.Org, ns) == 0 {
		// Behind the barrier the namespace holds no document (a memory namespace's pack
		// asks every turn): nothing to find, so the query is not embedded.
		return &SearchAnswer{Hits: []Hit{}}, nil
	}
	vecs, err := s.embedder.Embed(ctx, []string{req.Query})
	if err != nil {
		return nil, httperr.Unavailable(httperr.CodeEmbedderDown, "the embedder is unavailable while embedding the query; retry", err)
	}
	depth := max(2*limit, 20)
	hits, stale, err := s.page(ctx, p.Org, ns, req.Query, vecs[0], f, depth, limit)
	if err != nil {
		return nil, err
	}
	return &SearchAnswer{Hits: hits, StaleDropped: stale}, nil
}

// searchFilter is the request's filter, its time bounds parsed: a bound that is not
// an RFC 3339 time, or an empty window, is refused naming its field.
func searchFilter(req *SearchRequest) (index.Filter, error) {
	f := index.Filter{SourcePrefix: req.SourcePrefix, Formats: req.Formats, Tags: req.Tags}
	for _, b := range []struct {
		field, value string
		into         *time.Time
	}{{"updated_after", req.UpdatedAfter, &f.UpdatedAfter}, {"updated_before", req.UpdatedBefore, &f.UpdatedBefore}} {
		if b.value == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, b.value)
		if err != nil {
			return f, httperr.Validation(b.field, b.field+" is not an RFC 3339 time: "+b.value)
		}
		*b.into = t
	}
	if !f.UpdatedAfter.IsZero() && !f.UpdatedBefore.IsZero() && !f.UpdatedAfter.Before(f.UpdatedBefore) {
		return f, httperr.Validation("updated_before", "updated_before must be later than updated_after")
	}
	return f, nil
}

// page fetches a pool of depth and checks it; a full pool that lost candidates is
// fetched again twice as deep.
func (s *Service) page(ctx context.Context, org, ns, query string, vec []float32, f index.Filter, depth, limit int) ([]Hit, int, error) {
	var hits []Hit
	var stale int
	for round := 0; round < 2; round++ {
		pool := s.index.Search(org, ns, query, vec, f, depth)
		served, err := s.check(ctx, org, ns, pool, f.Users)
		if err != nil {
			return nil, 0, err
		}
		hits, stale = hits[:0], len(pool)-len(served)
		for _, c := range served {
			if len(hits) == limit {
				break
			}
			hits = append(hits, hitOf(c))
		}
		if len(pool) < depth || stale == 0 || len(hits) == limit {
			break
		}
		depth *= 2
	}
	if hits == nil {
		hits = []Hit{}
	}
	return hits, stale, nil
}

// check keeps the candidates the heads serve, read in one statement: the source has a
// live head in the read's users, and the chunk is of the revision whose chunks the
// head serves.
func (s *Service) check(ctx context.Context, org, ns string, pool []index.Candidate, u store.Users) ([]index.Candidate, error) {
	if len(pool) == 0 {
		return nil, nil
	}
	seen := map[string]bool{}
	var uris []string
	for _, c := range pool {
		if !seen[c.SourceURI] {
			seen[c.SourceURI] = true
			uris = append(uris, c.SourceURI)
		}
	}
	heads, err := store.ReadServing(ctx, s.pool, org, ns, uris, u)
	if err != nil {
		return nil, httperr.Store("checking the page against the documents' heads", err)
	}
	out := pool[:0:0]
	for _, c := range pool {
		h, ok := heads[c.SourceURI]
		if ok && h.Seen && !h.Deleted && c.Seq == h.ChunksSeq && c.Version == h.ChunksVersion {
			out = append(out, c)
		}
	}
	return out, nil
}

func hitOf(c index.Candidate) Hit {
	tags := c.Tags
	if tags == nil {
		tags = []string{}
	}
	return Hit{SourceURI: c.SourceURI, DocID: c.DocID, Version: c.Version, Ordinal: c.Ordinal, HeadingPath: c.HeadingPath,
		Kind: c.Kind, Text: c.Text, Title: c.Title, Format: c.Format, Tags: tags, UserID: c.UserID, UpdatedAt: c.UpdatedAt.UTC(), Score: c.Score, Lexical: c.Lexical, Vector: c.Vector}
}

// Search is knowledge.search for a caller in process: context.pack's knowledge layer
// (wired in cmd/loomd/app) reads the plane through it, with the same barrier and heads
// check as the route.
func (s *Service) Search(ctx context.Context, p auth.Principal, ns string, req SearchRequest) (*SearchAnswer, error) {
	return s.search(ctx, p, ns, &req)
}
