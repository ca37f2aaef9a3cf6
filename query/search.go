package query

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// maxQueryChars bounds a search query's text.
const maxQueryChars = 4000

// searchRequest is the body of POST /v1/namespaces/{ns}/memories:search.
type searchRequest struct {
	Query      string `json:"query"`
	TopK       int    `json:"top_k"`
	Agent      string `json:"agent"`
	UserID     string `json:"user_id"`
	SessionID  string `json:"session_id"`
	MemoryType string `json:"memory_type"`
}

// hitView is one search hit with the scores that ranked it.
type hitView struct {
	memoryView
	Score  float64            `json:"score"`
	Scores map[string]float64 `json:"scores"`
}

// Verdicts a search answers with: an honest abstain when nothing matches well.
const (
	VerdictOK             = "ok"
	VerdictNoMatch        = "no_match"
	VerdictBelowThreshold = "below_threshold"
)

type searchAnswer struct {
	Hits         []hitView `json:"hits"`
	Verdict      string    `json:"verdict"`
	StaleDropped int       `json:"stale_dropped"`
	Barrier      Passed    `json:"barrier"`
}

// handleSearch is memory.search (vector leg): barrier, embed the query, rank the
// namespace's search documents by cosine, and serve only hits whose Postgres head
// still holds the content the document was built from.
func (s *Service) handleSearch(c *fiber.Ctx) error {
	start := s.now()
	ans, err := s.search(c)
	verdict := "error"
	if ans != nil {
		verdict = ans.Verdict
	}
	s.searches.With(verdict).Inc()
	s.searchTime.ObserveSince(start)
	if err != nil {
		return err
	}
	return c.JSON(ans)
}

func (s *Service) search(c *fiber.Ctx) (*searchAnswer, error) {
	p := auth.From(c)
	ns := c.Params("ns")
	if err := p.Namespace(ns); err != nil {
		return nil, err
	}
	req, err := s.decodeSearch(c.Body())
	if err != nil {
		return nil, err
	}
	f := filter{org: p.Org, namespace: ns, agent: req.Agent, userID: req.UserID, sessionID: req.SessionID, memoryType: req.MemoryType}
	if p.ReadUserID != "" {
		if f.userID != "" && f.userID != p.ReadUserID {
			return &searchAnswer{Hits: []hitView{}, Verdict: VerdictNoMatch}, nil
		}
		f.userID = p.ReadUserID
	}
	ctx := c.UserContext()
	passed, err := s.barrier.Wait(ctx, p.Org, []string{ns})
	if err != nil {
		return nil, err
	}
	vec, err := s.embedder.query(ctx, req.Query)
	if err != nil {
		if errors.Is(err, embed.ErrEmbedderUnavailable) {
			return nil, httperr.Unavailable(httperr.CodeEmbedderDown, "the embedder is unavailable; retry", err)
		}
		return nil, httperr.Store("embedding the query", err)
	}
	// Over-fetch, so hits the validation drops can be refilled once from the
	// ranked remainder.
	candidates, err := s.vectorLeg(ctx, f, vec, req.TopK*3+10)
	if err != nil {
		return nil, chUnavailable("running the vector leg", err)
	}
	hits, stale, err := s.validate(ctx, f, candidates, req.TopK)
	if err != nil {
		return nil, httperr.Store("validating hits against their heads", err)
	}
	s.staleDropped.Add(float64(stale))
	ans := &searchAnswer{Hits: hits, StaleDropped: stale, Barrier: passed, Verdict: VerdictOK}
	switch {
	case len(hits) == 0:
		ans.Verdict = VerdictNoMatch
	case hits[0].Score < s.cfg.MinScore:
		ans.Verdict = VerdictBelowThreshold
	}
	return ans, nil
}

func (s *Service) decodeSearch(body []byte) (*searchRequest, error) {
	var req searchRequest
	if err := httperr.DecodeBody(body, &req); err != nil {
		return nil, err
	}
	if req.Query == "" {
		return nil, httperr.Validation("query", "query is required")
	}
	if n := utf8.RuneCountInString(req.Query); n > maxQueryChars {
		return nil, httperr.Validation("query", fmt.Sprintf("query has %d characters; at most %d", n, maxQueryChars))
	}
	if req.TopK == 0 {
		req.TopK = s.cfg.TopKDefault
	}
	if req.TopK < 1 || req.TopK > s.cfg.TopKMax {
		return nil, httperr.Validation("top_k", fmt.Sprintf("top_k must be between 1 and %d", s.cfg.TopKMax))
	}
	for _, f := range []struct{ name, v string }{{"agent", req.Agent}, {"user_id", req.UserID}, {"session_id", req.SessionID}} {
		if f.v != "" {
			if err := memrow.ValidateIdentity(f.name, f.v); err != nil {
				return nil, err
			}
		}
	}
	return &req, nil
}
