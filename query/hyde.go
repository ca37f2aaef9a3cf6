package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/llm"
)

// HyDE (memory-architecture memory.search step 3): a question rarely shares the words
// or the shape of the memory that answers it ("What is Lars studying?" against "Lars
// is learning to knit"). With a model provider configured, one call writes a short
// passage that would answer it, and the passage's embedding is averaged with the
// question's (both unit length), so the vector leg, and the chunk leg that ranks by the
// same vector, rank by what an answer would say as well as by what was asked. The
// lexical and key legs keep the question's own words, and the gates read the legs as
// always. Without a provider nothing is asked; a model error or a call past
// LOOM_SEARCH_HYDE_BUDGET_MS leaves the question's vector alone (fail open), and the
// explain block says which happened.

// hydeMaxTokens caps the hypothetical answer: a sentence or two is all it needs to be.
const hydeMaxTokens = 120

// hydeOutcome is what HyDE did for a search, as its explain block reports it.
type hydeOutcome struct {
	Status string `json:"status"` // off, used, failed
	Model  string `json:"model,omitempty"`
	// Passage is the hypothetical answer whose vector joined the query's.
	Passage string `json:"passage,omitempty"`
	Error   string `json:"error,omitempty"`
	Millis  int64  `json:"ms"`
}

// hydeOn reports whether HyDE runs: the setting is on and a provider answers.
func (s *Service) hydeOn() bool {
	return s.cfg.Retrieval.HyDE && s.model != nil && s.model.Configured()
}

// hyde answers the vector the vector leg ranks by: the query's, joined by the
// hypothetical answer's when HyDE runs and the model answers within the budget.
func (s *Service) hyde(ctx context.Context, org string, plan *searchPlan, query []float32) ([]float32, hydeOutcome) {
	out := hydeOutcome{Status: "off"}
	if !plan.settings.HyDE {
		return query, out
	}
	start := time.Now()
	hctx, cancel := context.WithTimeout(ctx, s.cfg.Retrieval.HyDEBudget)
	defer cancel()
	passage, model, err := s.hypothesise(hctx, org, plan.namespaces[0], plan.req.Query)
	var v []float32
	if err == nil {
		v, err = s.embedder.query(hctx, passage)
	}
	out.Millis = time.Since(start).Milliseconds()
	out.Model = model
	if err == nil && len(v) != len(query) {
		err = fmt.Errorf("the passage's vector has %d dimensions, the query's %d", len(v), len(query))
	}
	if err != nil {
		out.Status, out.Error = "failed", err.Error()
		if errors.Is(hctx.Err(), context.DeadlineExceeded) {
			out.Error = fmt.Sprintf("no answer within %s", s.cfg.Retrieval.HyDEBudget)
		}
		s.hydes.With("failed").Inc()
		return query, out
	}
	out.Status, out.Passage = "used", passage
	s.hydes.With("used").Inc()
	return meanUnit(query, v), out
}

// hypothesise asks the model for a passage that would answer the question.
func (s *Service) hypothesise(ctx context.Context, org, namespace, question string) (passage, model string, err error) {
	zero := 0.0
	ans, err := s.model.Complete(ctx, llm.Request{
		Bill: llm.Bill{Org: org, Namespace: namespace, Purpose: llm.PurposeHyDE},
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "Write one or two short sentences that a personal memory store could hold and that " +
				"would answer the user's question, stated as plain facts in the third person. Invent plausible details where " +
				"you must; do not hedge, ask back or explain."},
			{Role: llm.RoleUser, Content: question},
		},
		MaxTokens: hydeMaxTokens, Temperature: &zero,
	})
	if err != nil {
		return "", ans.Model, err
	}
	passage = strings.TrimSpace(ans.Content)
	if passage == "" {
		return "", ans.Model, errors.New("the model wrote no passage")
	}
	return passage, ans.Model, nil
}

// meanUnit is the unit-length mean of two vectors, each taken at unit length.
func meanUnit(a, b []float32) []float32 {
	na, nb := vectorNorm(a), vectorNorm(b)
	if na == 0 || nb == 0 {
		return a
	}
	out := make([]float32, len(a))
	var sum float64
	for i := range a {
		x := float64(a[i])/na + float64(b[i])/nb
		out[i] = float32(x)
		sum += x * x
	}
	if sum == 0 {
		return a
	}
	n := math.Sqrt(sum)
	for i := range out {
		out[i] = float32(float64(out[i]) / n)
	}
	return out
}

func vectorNorm(v []float32) float64 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	return math.Sqrt(sum)
}
