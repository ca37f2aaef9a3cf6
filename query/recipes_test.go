package query

import (
	"errors"
	"net/http"
	"testing"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/retrieval"
)

func testService() *Service {
	cfg := config.Query{MinScore: 0.3, Weights: config.Weights{Vector: 0.3, Lexical: 0.4, Key: 0.3, Graph: 0.2},
		Retrieval: config.Retrieval{AdaptiveThresholds: true, MinDistinctness: 1.25, Grounding: "abstain", LegPool: 200}}
	return &Service{cfg: settings{Query: cfg, Weights: Weights(cfg.Weights)}}
}

func fp(v float64) *float64 { return &v }

// fieldOf is the field a validation error names.
func fieldOf(err error) string {
	var fe *memrow.FieldError
	var he *httperr.Error
	switch {
	case errors.As(err, &fe):
		return fe.Field
	case errors.As(err, &he) && he.Status == http.StatusUnprocessableEntity:
		return he.Field
	}
	return ""
}

func TestSettingsLayer(t *testing.T) {
	s := testService()
	// Configuration alone.
	got, err := s.settleRetrieval(retrieval.Settings{}, &searchRequest{})
	if err != nil || got.Recipe != retrieval.RecipeDefault || got.Pool != 200 || got.Weights.Lexical != 0.4 || got.MinScoreSet || got.Rerank {
		t.Fatalf("defaults: %+v %v", got, err)
	}
	// The namespace's recipe, its own fields over it, the request's over those.
	ns := retrieval.Settings{Recipe: retrieval.RecipePrecise, Pool: 300, Weights: &retrieval.Weights{Key: fp(0.5)}}
	got, _ = s.settleRetrieval(ns, &searchRequest{Weights: &retrieval.Weights{Vector: fp(0.1)}, Grounding: "annotate"})
	if got.Recipe != retrieval.RecipePrecise || got.Pool != 300 || got.Weights.Vector != 0.1 || got.Weights.Lexical != 0.4 ||
		got.Weights.Key != 0.5 || got.MinDistinctness != 2 || got.Grounding != "annotate" || got.runs(retrieval.LegGraph) {
		t.Errorf("layered: %+v", got)
	}
	// A request's recipe replaces the namespace's; graph: true adds the graph leg.
	got, _ = s.settleRetrieval(ns, &searchRequest{Recipe: retrieval.RecipeRecent, Graph: true})
	if got.Recipe != retrieval.RecipeRecent || !got.Recency || got.MinDistinctness != 1.25 || !got.runs(retrieval.LegGraph) {
		t.Errorf("request recipe: %+v", got)
	}
	// rerank asked with no reranker configured stays off.
	yes := true
	if got, _ := s.settleRetrieval(retrieval.Settings{Rerank: &yes}, &searchRequest{}); got.Rerank {
		t.Error("rerank on without a reranker")
	}
}

func TestSettingsBounds(t *testing.T) {
	s := testService()
	for field, req := range map[string]searchRequest{
		"recipe":           {Recipe: "fastest"},
		"legs":             {Legs: []string{"graph"}},
		"weights.vector":   {Weights: &retrieval.Weights{Vector: fp(1.5)}},
		"weights":          {Weights: &retrieval.Weights{Vector: fp(0), Lexical: fp(0), Key: fp(0)}},
		"pool":             {Pool: 5},
		"min_score":        {MinScore: fp(-0.1)},
		"min_distinctness": {MinDistinctness: fp(11)},
		"grounding":        {Grounding: "sometimes"},
	} {
		_, err := s.settleRetrieval(retrieval.Settings{}, &req)
		if got := fieldOf(err); got != field {
			t.Errorf("%s: %v (field %q), want a 422 naming it", field, err, got)
		}
	}
	if err := (retrieval.Settings{Pool: 5000}).Validate("retrieval_defaults"); err == nil || err.(*memrow.FieldError).Field != "retrieval_defaults.pool" {
		t.Errorf("namespace bounds: %v", err)
	}
}
