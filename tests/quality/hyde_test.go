package quality

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/corpus"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// HyDE measured with a semantic embedder. Two API processes over the same rows, both
// embedding through a scripted OpenAI-compatible server, one with LOOM_SEARCH_HYDE off
// and one with it on, run the personal-facts corpus's questions (paraphrases and
// no-answer questions) and the conversation corpus's, each half apart.
//
// The scripted embedder (semanticVector) spreads its similarities as a semantic model
// does, not as the built-in hash embedder: a word is the sum of its concept's vector
// and its own (semanticConcepts groups words of one meaning: spouse, partner, wife...),
// so paraphrases score high without sharing a word; function words count a quarter;
// and every text shares a common direction, so unrelated texts sit near 0.3 rather than
// 0 (the narrow, high band of a real model). The abstain gates therefore judge a
// second score distribution. The groups are general English (family, home, study,
// work, pets, food, health, transport, music, sport, languages), written from the
// facts and the tuning questions, never from the held-out ones.
//
// The scripted model's hypothetical answer (hypotheticalAnswer) follows a fixed rule:
// the question's content words as a statement, each followed by the first other word
// of its concept group (what a model would write in the answer's own words), then an
// invented detail ("Sam."), as HyDE's made-up specifics are. The embedder is
// semantic_test.go's, which the abstain gates' measurement shares.

// questionWords are a question's own words, left out of its hypothetical answer.
var questionWords = map[string]bool{"what": true, "which": true, "who": true, "whom": true, "where": true, "when": true, "how": true,
	"why": true, "does": true, "do": true, "did": true, "is": true, "are": true, "was": true, "were": true, "can": true, "the": true, "a": true,
	"an": true, "of": true, "in": true, "to": true, "for": true, "any": true, "have": true, "has": true, "kind": true}

// hypotheticalAnswer is the scripted model's passage for a question (see the comment
// atop this file).
func hypotheticalAnswer(question string) string {
	var out []string
	for _, w := range strings.Fields(strings.Trim(question, "?!. ")) {
		lw := strings.ToLower(strings.Trim(w, "?!.,"))
		if questionWords[lw] {
			continue
		}
		out = append(out, strings.Trim(w, "?!.,"))
		bare := strings.TrimSuffix(lw, "'s")
		if g, ok := conceptOf[bare]; ok {
			for _, syn := range semanticConcepts[g] {
				if syn != bare {
					out = append(out, syn)
					break
				}
			}
		}
	}
	return strings.Join(out, " ") + ". Sam."
}

// hydeQuestion is one question of either corpus, as the HyDE measurement runs it.
type hydeQuestion struct {
	corpus, half, ns, query, referenceTime string
	expected                               []string
}

// hydeFigures are one corpus half's figures under one setting.
type hydeFigures struct {
	ranked  figures
	abstain abstainFigures
	used    int // searches whose explain said HyDE was used
	// falseVerdicts are the answerable questions' abstentions, by verdict.
	falseVerdicts map[string]int
}

func TestHyDEWithASemanticEmbedder(t *testing.T) {
	srv := newSemanticEmbedderServer(t)
	srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		q := r.Messages[len(r.Messages)-1].Content
		return llmtest.Text(hypotheticalAnswer(q))
	})
	personal, conv := readBothCorpora(t)
	off, on := startHyDEAPIs(t, srv, personal.Clock)
	questions, pns, convNS := writeHyDECorpus(t, off, personal, conv)
	ctx := context.Background()
	// The first search of each namespace on each process waits for its projection.
	for _, c := range []*testenv.Client{off, on} {
		waitForProjections(ctx, t, c, append([]string{pns}, mapValues(convNS)...))
	}
	answers := runHyDEQuestions(ctx, t, off, on, questions)
	figs := hydeMeasure(questions, answers)
	logAndWriteResults(t, "RESULTS-hyde.md", hydeMarkdown(figs))
	assertHyDEUsed(t, figs)
}

// startHyDEAPIs starts two API processes over the same store, HyDE off and on, so the
// setting is the only difference between the columns.
func startHyDEAPIs(t *testing.T, srv *llmtest.Server, clock string) (off, on *testenv.Client) {
	mod := func(hyde bool) func(*config.Config) {
		return func(c *config.Config) {
			c.SearchIndex.Mode = config.SearchIndexMemory
			c.Query.ProjectionWait = 60 * time.Second
			c.Embedder.Kind, c.Embedder.OpenAI.BaseURL, c.Embedder.OpenAI.Model, c.Embedder.Dim = "openai", srv.URL, "scripted-semantic", semanticDim
			c.LLM.BaseURL, c.LLM.Model, c.LLM.MaxAttempts = srv.URL, "m", 1
			c.Query.Retrieval.HyDE, c.Query.Retrieval.HyDEBudget = hyde, 10*time.Second
		}
	}
	nOff, urlOff := env.API(t, mod(false), apiOptions(t, clock)...)
	_, urlOn := env.API(t, mod(true), apiOptions(t, clock)...)
	token := env.Token(t, nOff, auth.NewToken{Org: "hyde"})
	return testenv.NewClient(urlOff, token), testenv.NewClient(urlOn, token)
}

// writeHyDECorpus writes the personal facts and every dialogue through off (both
// processes read the same rows) and lists the questions with their namespaces; it
// returns the personal namespace and the dialogues' namespaces by dialogue.
func writeHyDECorpus(t *testing.T, off *testenv.Client, personal personalCorpus, conv corpus.Conversations) ([]hydeQuestion, string, map[string]string) {
	var questions []hydeQuestion
	pns := testenv.Unique(t, "hyde-personal")
	bulkSetOrFatal(t, off, pns, personalEntries(personal))
	for _, q := range personal.Queries {
		questions = append(questions, hydeQuestion{corpus: "personal", half: q.Half, ns: pns, query: q.Query, expected: q.Expected})
	}
	convNS := map[string]string{}
	for i, d := range conv.Dialogues {
		ns := testenv.Unique(t, "hyde-conv-"+d.ID)
		convNS[d.ID] = ns
		bulkSetOrFatal(t, off, ns, dialogueEntries(conv, i))
	}
	for _, q := range conv.Questions {
		questions = append(questions, hydeQuestion{corpus: "conversations", half: q.Half, ns: convNS[q.Dialogue], query: q.Query,
			referenceTime: q.ReferenceTime, expected: q.Expected})
	}
	return questions, pns, convNS
}

// runHyDEQuestions runs every question on both processes; answers[i] is question i's
// answer with HyDE off, then on.
func runHyDEQuestions(ctx context.Context, t *testing.T, off, on *testenv.Client, questions []hydeQuestion) [][2]answer {
	answers := make([][2]answer, len(questions))
	eachInParallel(t, len(questions), workers, func(i int) error {
		q := questions[i]
		more := map[string]any{}
		if q.referenceTime != "" {
			more["reference_time"] = q.referenceTime
		}
		for j, c := range []*testenv.Client{off, on} {
			a, err := search(ctx, c, q.ns, q.query, fusedTopK, "weighted", more)
			if err != nil {
				return fmt.Errorf("%s %q: %w", q.corpus, q.query, err)
			}
			answers[i][j] = a
		}
		return nil
	})
	return answers
}

// hydeMeasure sums the answers into figures by corpus/half, HyDE off then on.
func hydeMeasure(questions []hydeQuestion, answers [][2]answer) map[string]*[2]hydeFigures {
	figs := map[string]*[2]hydeFigures{} // corpus/half → off, on
	for i, q := range questions {
		k := q.corpus + "/" + q.half
		if figs[k] == nil {
			figs[k] = &[2]hydeFigures{}
		}
		for j := range 2 {
			a := answers[i][j]
			f := &figs[k][j]
			if a.Explain.HyDE.Status == "used" {
				f.used++
			}
			f.abstain.count(len(q.expected) == 0, a.Verdict != "ok")
			if len(q.expected) > 0 && a.Verdict != "ok" {
				if f.falseVerdicts == nil {
					f.falseVerdicts = map[string]int{}
				}
				f.falseVerdicts[a.Verdict]++
			}
			if len(q.expected) > 0 {
				f.ranked.add(servedAt(a.Hits, relevantSet(q.expected)))
			}
		}
	}
	return figs
}

// hydeMarkdown writes the report RESULTS-hyde.md holds.
func hydeMarkdown(figs map[string]*[2]hydeFigures) string {
	var md strings.Builder
	fmt.Fprintf(&md, "# HyDE with a semantic embedder\n\nWritten by `LOOM_QUALITY_WRITE=1 go test -count=1 -p 1 -run TestHyDEWithASemanticEmbedder ./tests/quality/`. "+
		"Both corpora's questions, the weighted search at top_k 10, against a scripted OpenAI-compatible server: its embedder spreads similarities "+
		"as a semantic model does and its model writes a hypothetical answer by a fixed rule (see hyde_test.go). The same rows, the same run, "+
		"LOOM_SEARCH_HYDE off and on. A search abstains when its verdict is not ok.\n\n"+
		"| corpus | half | HyDE | answerable | recall@5 | MRR@10 | answerable abstained | no-answer abstained | abstain precision | abstain recall | HyDE used | answerable abstained by verdict |\n"+
		"|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, corpus := range []string{"personal", "conversations"} {
		for _, half := range convHalves {
			pair := figs[corpus+"/"+half]
			for j, setting := range []string{"off", "on"} {
				f := pair[j]
				m := f.ranked.mean()
				fmt.Fprintf(&md, "| %s | %s | %s | %d | %.3f | %.3f | %d | %d of %d | %s | %s | %d | %s |\n", corpus, half, setting, m.n, m.recall5, m.mrr,
					f.abstain.abstained-f.abstain.correct, f.abstain.correct, f.abstain.noAnswer, pct(f.abstain.precision()), pct(f.abstain.recall()), f.used,
					verdictCounts(f.falseVerdicts))
			}
		}
	}
	return md.String()
}

// assertHyDEUsed checks the measurement is of HyDE: every search with it on used the
// model's passage, none with it off did.
func assertHyDEUsed(t *testing.T, figs map[string]*[2]hydeFigures) {
	for k, pair := range figs {
		n := pair[0].ranked.n + pair[0].abstain.noAnswer
		if pair[0].used != 0 || pair[1].used != n {
			t.Errorf("%s: HyDE used by %d searches off and %d of %d on", k, pair[0].used, pair[1].used, n)
		}
	}
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
