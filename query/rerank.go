package query

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
)

// Reranker scores a search's hits against its query with a model: a chat model
// through the model provider, or a cross-encoder's rerank endpoint. A search that
// reranks sends its page (the hits no exact identifier pins) and reorders them by the
// scores; any failure, or the time budget running out, leaves the fused order.
type Reranker interface {
	// Name says which reranker answered (llm:<model>, cross_encoder:<url>).
	Name() string
	// Rerank scores each document against the query, in the documents' order; higher
	// is more relevant. org and namespace pay for a model call.
	Rerank(ctx context.Context, org, namespace, query string, docs []string) ([]float64, error)
}

// maxRerankDocChars bounds the text of one hit sent to a reranker.
const maxRerankDocChars = 2000

// NewReranker builds the reranker LOOM_SEARCH_RERANKER names, or nil for none. The
// llm reranker needs the model provider configured.
func NewReranker(cfg config.Retrieval, provider *llm.Provider, client *http.Client) (Reranker, error) {
	if client == nil {
		client = &http.Client{}
	}
	switch cfg.Reranker {
	case "":
		return nil, nil
	case "llm":
		if provider == nil || !provider.Configured() {
			return nil, errors.New("LOOM_SEARCH_RERANKER=llm needs the model provider: set LOOM_LLM_BASE_URL and LOOM_LLM_MODEL")
		}
		return &llmReranker{provider: provider, model: cfg.RerankerModel}, nil
	case "cross_encoder":
		return &crossEncoder{url: cfg.RerankerURL, model: cfg.RerankerModel, apiKey: cfg.RerankerAPIKey, client: client}, nil
	}
	return nil, fmt.Errorf("LOOM_SEARCH_RERANKER: unknown reranker %q", cfg.Reranker)
}

// llmReranker asks a chat model for a relevance score per passage.
type llmReranker struct {
	provider *llm.Provider
	model    string
}

var rerankSchema = mustSchema("rerank_scores", "One relevance score from 0 to 10 per passage, in the passages' order.", map[string]any{
	"type": "object",
	"properties": map[string]any{
		"scores": map[string]any{"type": "array", "items": map[string]any{"type": "number"}},
	},
	"required":             []any{"scores"},
	"additionalProperties": false,
})

func mustSchema(name, description string, doc map[string]any) *llm.Schema {
	s, err := llm.NewSchema(name, description, doc)
	if err != nil {
		panic(err)
	}
	return s
}

func (r *llmReranker) Name() string {
	if r.model != "" {
		return "llm:" + r.model
	}
	return "llm:" + r.provider.Model(llm.PurposeRerank)
}

func (r *llmReranker) Rerank(ctx context.Context, org, namespace, query string, docs []string) ([]float64, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Query: %s\n\nPassages:\n", query)
	for i, d := range docs {
		fmt.Fprintf(&b, "[%d] %s\n", i+1, strings.ReplaceAll(d, "\n", " "))
	}
	zero := 0.0
	var out struct {
		Scores []float64 `json:"scores"`
	}
	_, err := r.provider.CompleteJSON(ctx, llm.Request{
		Bill:  llm.Bill{Org: org, Namespace: namespace, Purpose: llm.PurposeRerank},
		Model: r.model,
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You judge how well each passage answers the query. Score every passage from 0 (unrelated) " +
				"to 10 (answers it fully), in the passages' order, one score per passage."},
			{Role: llm.RoleUser, Content: b.String()},
		},
		Schema: rerankSchema, Temperature: &zero,
	}, &out)
	if err != nil {
		return nil, err
	}
	if len(out.Scores) != len(docs) {
		return nil, fmt.Errorf("the reranker scored %d passages of %d", len(out.Scores), len(docs))
	}
	return out.Scores, nil
}

// crossEncoder calls a rerank endpoint in the shape Cohere, Jina, vLLM and Infinity
// serve: POST {model, query, documents} answered by results of {index,
// relevance_score}; text-embeddings-inference's bare list of {index, score} is read
// too.
type crossEncoder struct {
	url, model, apiKey string
	client             *http.Client
}

func (c *crossEncoder) Name() string { return "cross_encoder:" + c.url }

func (c *crossEncoder) Rerank(ctx context.Context, _, _ string, query string, docs []string) ([]float64, error) {
	body := map[string]any{"query": query, "documents": docs, "texts": docs, "top_n": len(docs), "return_documents": false}
	if c.model != "" {
		body["model"] = c.model
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the rerank endpoint answered %d: %.200s", resp.StatusCode, answer)
	}
	type result struct {
		Index          int      `json:"index"`
		RelevanceScore *float64 `json:"relevance_score"`
		Score          *float64 `json:"score"`
	}
	var wrapped struct {
		Results []result `json:"results"`
	}
	var results []result
	if err := json.Unmarshal(answer, &wrapped); err == nil && wrapped.Results != nil {
		results = wrapped.Results
	} else if err := json.Unmarshal(answer, &results); err != nil {
		return nil, fmt.Errorf("the rerank endpoint's answer does not decode: %w", err)
	}
	scores := make([]float64, len(docs))
	seen := make([]bool, len(docs))
	for _, r := range results {
		s := r.RelevanceScore
		if s == nil {
			s = r.Score
		}
		if r.Index < 0 || r.Index >= len(docs) || seen[r.Index] || s == nil {
			return nil, fmt.Errorf("the rerank endpoint's answer has a bad or repeated index %d", r.Index)
		}
		scores[r.Index], seen[r.Index] = *s, true
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("the rerank endpoint scored no document %d", i)
		}
	}
	return scores, nil
}

// rerankOutcome is what the reranker did to a page, as the answer explains it.
type rerankOutcome struct {
	Status   string `json:"status"` // off, reordered, kept (same order), failed
	Reranker string `json:"reranker,omitempty"`
	Sent     int    `json:"sent"`
	Pinned   int    `json:"pinned"`
	Error    string `json:"error,omitempty"`
	Millis   int64  `json:"ms"`
}

// rerankPage reorders the page's unpinned hits by the reranker's scores, within the
// time budget; the pinned hits keep their slots, and the slots' scores stay where
// they are, so the page still reads best first.
func (s *Service) rerankPage(ctx context.Context, org string, plan *searchPlan, hits []hitView) rerankOutcome {
	out := rerankOutcome{Status: "off"}
	if !plan.settings.Rerank || s.reranker == nil || len(hits) < 2 {
		return out
	}
	out.Reranker = s.reranker.Name()
	pins := pinned(plan.query, hits)
	var slots []int
	for i, p := range pins {
		if p {
			out.Pinned++
		} else if len(slots) < s.cfg.Retrieval.RerankDepth {
			slots = append(slots, i)
		}
	}
	out.Sent = len(slots)
	if len(slots) < 2 {
		out.Status = "kept"
		return out
	}
	docs := make([]string, len(slots))
	for i, slot := range slots {
		t := memrow.ValueText(hits[slot].Value)
		if r := []rune(t); len(r) > maxRerankDocChars {
			t = string(r[:maxRerankDocChars])
		}
		docs[i] = t
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Retrieval.RerankBudget)
	defer cancel()
	scores, err := s.reranker.Rerank(rctx, org, plan.namespaces[0], plan.req.Query, docs)
	out.Millis = time.Since(start).Milliseconds()
	if err != nil {
		out.Status, out.Error = "failed", err.Error()
		if errors.Is(rctx.Err(), context.DeadlineExceeded) {
			out.Error = fmt.Sprintf("no answer within %s", s.cfg.Retrieval.RerankBudget)
		}
		s.reranks.With("failed").Inc()
		return out
	}
	order := make([]int, len(slots)) // order[i]: which sent hit takes slot i
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return scores[order[a]] > scores[order[b]] })
	moved := false
	sent := make([]hitView, len(slots))
	for i, slot := range slots {
		sent[i] = hits[slot]
	}
	for i, slot := range slots {
		h := sent[order[i]]
		moved = moved || order[i] != i
		h.Scores["rerank"] = round6(scores[order[i]])
		h.Score = sent[i].Score // the slot's own score: the page still reads best first
		hits[slot] = h
	}
	out.Status = "kept"
	if moved {
		out.Status = "reordered"
	}
	s.reranks.With(out.Status).Inc()
	return out
}
