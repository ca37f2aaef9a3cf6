package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// HyDE: with a provider configured, one model call writes a hypothetical answer whose
// vector joins the query's in the vector leg, so a memory worded like the answer and
// not like the question scores higher there; a model error or a call past the budget
// leaves the query's vector alone and the search answers as before, and the explain
// block says which happened.
func TestSearchHyDE(t *testing.T) {
	srv := llmtest.New(t)
	const budget = 3 * time.Second
	n, url := env.API(t, func(c *config.Config) {
		c.LLM.BaseURL, c.LLM.Model, c.LLM.MaxAttempts = srv.URL, "m", 1
		c.Query.Retrieval.HyDE, c.Query.Retrieval.HyDEBudget = true, budget
	})
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	e := &phaseEnv{t: t, c: c, pool: env.PG(t), ns: testenv.Unique(t, "hyde"), org: "acme"}
	c.AppendOnly(t, e.ns)
	typedSet(t, c, e.ns, "lars.hobby", client.SetRequest{Value: "Lars is learning to knit scarves at the Tuesday evening class"})
	typedSet(t, c, e.ns, "lars.car", client.SetRequest{Value: "Lars drives an old green Volvo to work"})
	typedSet(t, c, e.ns, "mina.city", client.SetRequest{Value: "Mina moved to Nairobi last spring"})
	question := "What is Lars studying these days?"
	hobby := func(a *client.SearchAnswer) client.Hit {
		t.Helper()
		for _, h := range a.Hits {
			if h.MemoryKey == "lars.hobby" {
				return h
			}
		}
		t.Fatalf("lars.hobby is not among %v", answerKeys(a))
		return client.Hit{}
	}

	srv.Reply(llmtest.Status(500, "the model is down"))
	failed := e.search(c, question, client.SearchRequest{})
	if h := failed.Explain.HyDE; h.Status != "failed" || !strings.Contains(h.Error, "the model is down") || h.Passage != "" {
		t.Errorf("a model error: hyde %+v, want failed naming the error", h)
	}
	if len(failed.Hits) != 3 {
		t.Errorf("a model error failed the search: verdict %s, hits %v", failed.Verdict, answerKeys(failed))
	}

	passage := "Lars is learning to knit scarves at an evening class."
	srv.Reply(llmtest.Text(passage))
	used := e.search(c, question, client.SearchRequest{})
	if h := used.Explain.HyDE; h.Status != "used" || h.Passage != passage || h.Model != "m" {
		t.Errorf("a model's passage: hyde %+v, want used with the passage", h)
	}
	if v0, v1 := hobby(failed).Scores.Vector, hobby(used).Scores.Vector; v1 <= v0 {
		t.Errorf("the passage's vector did not join the vector leg: lars.hobby's vector score %.4f with it, %.4f without", v1, v0)
	}
	if got := answerKeys(used); got[0] != "lars.hobby" {
		t.Errorf("with the passage, ranked %v", got)
	}

	srv.Reply(llmtest.Text(passage).After(time.Minute))
	late := e.search(c, question, client.SearchRequest{})
	if h := late.Explain.HyDE; h.Status != "failed" || !strings.Contains(h.Error, "no answer within") {
		t.Errorf("a model past the budget: hyde %+v, want failed, no answer within %s", h, budget)
	}
	if hobby(late).Scores.Vector != hobby(failed).Scores.Vector {
		t.Errorf("past the budget the query's vector alone should rank: %.4f, want %.4f", hobby(late).Scores.Vector, hobby(failed).Scores.Vector)
	}

	chats := srv.Chats()
	if len(chats) != 3 || !chats[1].Contains(question) {
		t.Errorf("the model was asked %d times (want one per search), the question in the second: %v", len(chats), len(chats) > 1 && chats[1].Contains(question))
	}
}

// Without a provider HyDE is off whatever its setting, and no call is made.
func TestSearchHyDEOffWithoutAProvider(t *testing.T) {
	n, url := env.API(t, func(c *config.Config) { c.LLM.BaseURL, c.LLM.Model, c.Query.Retrieval.HyDE = "", "", true })
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "hyde-off")
	typedSet(t, c, ns, "lars.hobby", client.SetRequest{Value: "Lars is learning to knit"})
	a := typedSearch(t, c, ns, client.SearchRequest{Query: "What is Lars studying?"})
	if a.Explain.HyDE.Status != "off" || a.Explain.HyDE.Millis != 0 {
		t.Errorf("hyde without a provider: %+v, want off", a.Explain.HyDE)
	}
}
