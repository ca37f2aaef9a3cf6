package query

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/internal/metrics"
)

// scripted is a reranker that answers fn's scores.
type scripted func(ctx context.Context, docs []string) ([]float64, error)

func (s scripted) Name() string { return "scripted" }
func (s scripted) Rerank(ctx context.Context, _, _, _ string, docs []string) ([]float64, error) {
	return s(ctx, docs)
}

func rerankService(r Reranker) *Service {
	s := testService()
	s.cfg.Retrieval.RerankDepth, s.cfg.Retrieval.RerankBudget = 20, 200*time.Millisecond
	s.reranker = r
	s.reranks = metrics.NewRegistry().Counter("reranks", "", "outcome")
	return s
}

func rerankPlan(query string) *searchPlan {
	return &searchPlan{req: &searchRequest{Query: query}, namespaces: []string{"ns"}, settings: retrievalSettings{Rerank: true},
		query: planQuery(query, planNow)}
}

func page() []hitView {
	hits := []hitView{hitOf("a", "alpha"), hitOf("b", "TW-1042 is the epic"), hitOf("c", "gamma"), hitOf("d", "delta")}
	for i := range hits {
		hits[i].Score = 1 - 0.1*float64(i)
	}
	return hits
}

func keys(hits []hitView) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.MemoryKey)
	}
	return out
}

func TestRerankReordersAroundPinnedHits(t *testing.T) {
	var sent []string
	s := rerankService(scripted(func(_ context.Context, docs []string) ([]float64, error) {
		sent = docs
		return []float64{0.1, 0.5, 0.9}, nil // alpha, gamma, delta
	}))
	hits := page()
	out := s.rerankPage(context.Background(), "org", rerankPlan("what about TW-1042"), hits)
	if out.Status != "reordered" || out.Sent != 3 || out.Pinned != 1 || slices.Contains(sent, "TW-1042 is the epic") {
		t.Fatalf("outcome %+v, sent %q: the pinned hit is never sent", out, sent)
	}
	if got := keys(hits); !slices.Equal(got, []string{"d", "b", "c", "a"}) {
		t.Errorf("order %v: the pinned hit keeps slot 2, the others follow the scores", got)
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score {
			t.Errorf("slot %d's score rose over slot %d's: the slots keep their scores", i, i-1)
		}
	}
	if hits[0].Scores["rerank"] != 0.9 {
		t.Errorf("scores %v: the reranker's score is carried", hits[0].Scores)
	}
}

func TestRerankFailsOpen(t *testing.T) {
	for name, r := range map[string]scripted{
		"error": func(context.Context, []string) ([]float64, error) { return nil, errors.New("boom") },
		"slow": func(ctx context.Context, _ []string) ([]float64, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	} {
		hits := page()
		out := rerankService(r).rerankPage(context.Background(), "org", rerankPlan("alpha"), hits)
		if out.Status != "failed" || out.Error == "" || !slices.Equal(keys(hits), []string{"a", "b", "c", "d"}) {
			t.Errorf("%s: outcome %+v, order %v: the fused order stands", name, out, keys(hits))
		}
	}
	hits := page()
	plan := rerankPlan("alpha")
	plan.settings.Rerank = false
	if out := rerankService(nil).rerankPage(context.Background(), "org", plan, hits); out.Status != "off" {
		t.Errorf("not asked: %+v", out)
	}
}

// freeLedger lets every call through.
type freeLedger struct{}

func (freeLedger) Spent(context.Context, string, string, time.Time, llm.Purpose) (llm.Spent, error) {
	return llm.Spent{}, nil
}
func (freeLedger) Charge(context.Context, llm.Charge) error { return nil }

func TestLLMReranker(t *testing.T) {
	srv := llmtest.New(t)
	p, err := llm.New(config.LLM{BaseURL: srv.URL, Model: "m", Timeout: 5 * time.Second, Concurrency: 2, MaxAttempts: 1,
		RetryBase: time.Millisecond, DailyCostCapUSD: 10}, llm.Options{Ledger: freeLedger{}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReranker(config.Retrieval{Reranker: "llm", RerankerModel: "judge"}, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.Reply(llmtest.JSON(map[string]any{"scores": []float64{2, 9}}), llmtest.JSON(map[string]any{"scores": []float64{1}}))
	got, err := r.Rerank(context.Background(), "org", "ns", "who runs billing", []string{"the canteen", "Priya runs billing"})
	if err != nil || !slices.Equal(got, []float64{2, 9}) {
		t.Fatalf("scores %v, %v", got, err)
	}
	chat := srv.Chats()[0]
	if chat.Model != "judge" || !chat.Contains("[2] Priya runs billing") || chat.SchemaName != "rerank_scores" {
		t.Errorf("request: model %s, schema %s, %q", chat.Model, chat.SchemaName, chat.Text())
	}
	if _, err := r.Rerank(context.Background(), "org", "ns", "q", []string{"a", "b"}); err == nil {
		t.Error("one score for two passages was taken")
	}
	if _, err := NewReranker(config.Retrieval{Reranker: "llm"}, nil, nil); err == nil {
		t.Error("an llm reranker without a provider was built")
	}
}

func TestCrossEncoderReranker(t *testing.T) {
	answers := []string{
		`{"results":[{"index":1,"relevance_score":0.8},{"index":0,"relevance_score":0.1}]}`, // Cohere, Jina, vLLM
		`[{"index":0,"score":0.3},{"index":1,"score":0.6}]`,                                 // text-embeddings-inference
		`{"results":[{"index":5,"relevance_score":0.8}]}`,
	}
	var bodies []map[string]any
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b)
		b["auth"] = r.Header.Get("Authorization")
		bodies = append(bodies, b)
		w.Write([]byte(answers[len(bodies)-1]))
	}))
	defer ts.Close()
	r, err := NewReranker(config.Retrieval{Reranker: "cross_encoder", RerankerURL: ts.URL, RerankerModel: "bge", RerankerAPIKey: "k"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range [][]float64{{0.1, 0.8}, {0.3, 0.6}} {
		got, err := r.Rerank(context.Background(), "", "", "q", []string{"x", "y"})
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("scores %v, %v, want %v", got, err, want)
		}
	}
	if _, err := r.Rerank(context.Background(), "", "", "q", []string{"x", "y"}); err == nil {
		t.Error("an answer with a bad index was taken")
	}
	if b := bodies[0]; b["query"] != "q" || b["model"] != "bge" || b["auth"] != "Bearer k" {
		t.Errorf("request %v", b)
	}
}
