package quality

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/tests/testenv"
)

// The personal-facts corpus (personal.json) is everyday language nobody tuned the
// rest of the suite on: 100 short facts about 25 people, written by hand, under keys
// that carry none of their words (fact-001...), and 56 questions that paraphrase
// them ("What is the name of Priya's spouse?" of "Priya's partner is called Rafael")
// or ask what none of them says (an attribute of a person the corpus knows, or a
// person it does not). The questions come in two halves of the same make: tuning
// and held_out. Any threshold, weight or word list the search reads may be chosen
// by looking at the tuning half's figures; the held-out half is only measured, and
// its targets are the acceptance: answerable questions that abstain at most 5%,
// no-answer questions that abstain at least 75%, recall@5 at least 0.90. The
// corpus was written before the attribute grounding's word list (query/attribute.go,
// factKinds) was extended from the tuning queries; no word was added for a held-out
// question (held_out-25, "shoe size", stays a risk-flagged ok for that reason, though
// the quality corpus's none-11 asks the same).
const (
	personalMaxFalseAbstain = 0.05
	personalMinAbstain      = 0.75
	personalMinRecall5      = 0.90
)

type personalCorpus struct {
	Clock    string `json:"clock"`
	Memories []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"memories"`
	Queries []struct {
		ID       string   `json:"id"`
		Half     string   `json:"half"`
		Kind     string   `json:"kind"` // answerable, attribute, person
		Query    string   `json:"query"`
		Expected []string `json:"expected"`
	} `json:"queries"`
}

// halfFigures are one half's figures for the weighted search at top_k 10.
type halfFigures struct {
	ranked                     figures // the answerable questions' sums
	abstain                    abstainFigures
	verdicts                   map[string]int
	attributeFound, attrJudged int
}

// answerable, noAnswer, falseAbstain and trueAbstain count the half's questions.
func (h halfFigures) answerable() int   { return h.ranked.n }
func (h halfFigures) noAnswer() int     { return h.abstain.noAnswer }
func (h halfFigures) falseAbstain() int { return h.abstain.abstained - h.abstain.correct }
func (h halfFigures) trueAbstain() int  { return h.abstain.correct }

func TestPersonalFacts(t *testing.T) {
	b, err := os.ReadFile("personal.json")
	if err != nil {
		t.Fatal(err)
	}
	var c personalCorpus
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("personal.json: %v", err)
	}
	n, url := env.API(t, func(cfg *config.Config) {
		cfg.SearchIndex.Mode = config.SearchIndexMemory
		cfg.Query.TopKMax = allTopK
		cfg.Query.ProjectionWait = 60 * time.Second
	}, apiOptions(t, c.Clock)...)
	client := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "personal"}))
	ns := testenv.Unique(t, "personal")
	bulkSetOrFatal(t, client, ns, personalEntries(c))
	ctx := context.Background()
	answers, perLeg := make([]answer, len(c.Queries)), make([]answer, len(c.Queries))
	// The first search waits at the barrier for the projection.
	waitForProjections(ctx, t, client, []string{ns})
	eachInParallel(t, len(c.Queries), workers, func(i int) error {
		a, err := search(ctx, client, ns, c.Queries[i].Query, fusedTopK, "weighted", nil)
		if err == nil {
			answers[i] = a
			perLeg[i], err = search(ctx, client, ns, c.Queries[i].Query, allTopK, "weighted", map[string]any{"set_expansion": false})
		}
		if err != nil {
			return fmt.Errorf("%s %q: %w", c.Queries[i].ID, c.Queries[i].Query, err)
		}
		return nil
	})

	halves := map[string]*halfFigures{"tuning": {verdicts: map[string]int{}}, "held_out": {verdicts: map[string]int{}}}
	var log strings.Builder
	for i, q := range c.Queries {
		h := halves[q.Half]
		a := answers[i]
		h.verdicts[a.Verdict]++
		relevant := relevantSet(q.Expected)
		fmt.Fprintf(&log, "%s %-10s %-48q verdict=%-26s rank=%v risk=%.2f gates=%v\n", q.ID, q.Kind, q.Query, a.Verdict, ranksOf(a.Hits, q.Expected),
			a.RetrievalRisk.Score, a.Explain.Gates)
		h.abstain.count(len(q.Expected) == 0, a.Verdict != "ok")
		if len(q.Expected) > 0 {
			h.ranked.add(servedAt(a.Hits, relevant))
		}
	}
	if os.Getenv("LOOM_QUALITY_VERBOSE") == "1" {
		t.Log("\n" + log.String())
	}
	md := personalMarkdown(c, halves) + personalBaselines(ctx, t, c, answers, perLeg)
	logAndWriteResults(t, "RESULTS-personal.md", md)
	assertPersonalTargets(t, halves["held_out"])
}

// personalMarkdown is RESULTS-personal.md's first table: each half's figures as served.
func personalMarkdown(c personalCorpus, halves map[string]*halfFigures) string {
	var md strings.Builder
	fmt.Fprintf(&md, "# Personal facts: paraphrased questions\n\nWritten by `LOOM_QUALITY_WRITE=1 go test -count=1 -run TestPersonalFacts ./tests/quality/`. "+
		"Corpus: tests/quality/personal.json, %d hand-written facts about 25 people under keys without their words; %d questions in two halves "+
		"(the held-out half is measured, never tuned on). The weighted search at top_k 10, default configuration (the hash embedder). "+
		"A search abstains when its verdict is not ok; precision is the share of abstentions that fell on no-answer questions, recall the share "+
		"of no-answer questions that abstained.\n\n", len(c.Memories), len(c.Queries))
	fmt.Fprintf(&md, "| half | answerable | recall@5 | MRR@10 | answerable abstained | no-answer | no-answer abstained | abstain precision | abstain recall | verdicts |\n"+
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, name := range []string{"tuning", "held_out"} {
		h := halves[name]
		var vs []string
		for _, v := range []string{"ok", "no_match", "below_threshold", "low_calibrated_confidence", "ungrounded_identifier"} {
			if h.verdicts[v] > 0 {
				vs = append(vs, fmt.Sprintf("%s %d", v, h.verdicts[v]))
			}
		}
		fmt.Fprintf(&md, "| %s | %d | %.3f | %.3f | %d (%.1f%%) | %d | %d (%.1f%%) | %s | %s | %s |\n", name, h.answerable(),
			h.ranked.recall5/float64(h.answerable()), h.ranked.mrr/float64(h.answerable()), h.falseAbstain(), 100*float64(h.falseAbstain())/float64(h.answerable()),
			h.noAnswer(), h.trueAbstain(), 100*float64(h.trueAbstain())/float64(h.noAnswer()), pct(h.abstain.precision()), pct(h.abstain.recall()), strings.Join(vs, ", "))
	}
	return md.String()
}

// personalBaselines is RESULTS-personal.md's second table: the answerable questions'
// recall@5 and MRR@10 per half for each leg alone (re-ranked from the per-leg search,
// top_k above the corpus, set expansion off), plain BM25 and the exact vector scan
// under the hash embedder (conversation_test.go's, over the same facts), beside the
// weighted search as served, all in the same run.
func personalBaselines(ctx context.Context, t *testing.T, c personalCorpus, answers, perLeg []answer) string {
	hash := embed.NewHash(embed.DefaultHashDim)
	var docs []convDoc
	for _, m := range c.Memories {
		canonical, _ := json.Marshal(m.Value)
		docs = append(docs, convDoc{key: m.Key, text: m.Value, embedText: memrow.EmbedText(m.Key, canonical)})
	}
	base := newConvBaselines(ctx, t, hash, docs)
	systems := []string{sysVector, sysLexical, sysKey, convBM25, convExact, sysWeighted}
	figs := map[string]map[string]figures{"tuning": {}, "held_out": {}}
	for i, q := range c.Queries {
		if len(q.Expected) == 0 {
			continue
		}
		if len(perLeg[i].Hits) >= allTopK {
			t.Fatalf("%s: the per-leg search served %d hits, the ceiling: raise allTopK", q.ID, len(perLeg[i].Hits))
		}
		relevant := relevantSet(q.Expected)
		bm25, exact := base.rank(ctx, hash, q.Query)
		for _, sys := range systems {
			var r5, r10, rr float64
			switch sys {
			case sysWeighted:
				r5, r10, rr = servedAt(answers[i].Hits, relevant)
			case convBM25:
				r5, r10, rr = tiedAt(bm25, "score", relevant)
			case convExact:
				r5, r10, rr = tiedAt(exact, "score", relevant)
			default:
				r5, r10, rr = tiedAt(perLeg[i].Hits, legOf[sys], relevant)
			}
			f := figs[q.Half][sys]
			f.add(r5, r10, rr)
			figs[q.Half][sys] = f
		}
	}
	var md strings.Builder
	fmt.Fprintf(&md, "\n## Baselines, same run\n\nThe answerable questions: each leg alone (re-ranked from one search with top_k above the corpus "+
		"and set expansion off), plain BM25 (lower-cased words, no stemming, no stop words, k1 1.2, b 0.75) and the exact vector scan (every "+
		"fact's cosine to the question under the built-in hash embedder, over the text the service embeds), beside the weighted search as served.\n\n"+
		"| system | recall@5 tuning | recall@5 held out | MRR@10 tuning | MRR@10 held out |\n|---|---:|---:|---:|---:|\n")
	for _, sys := range systems {
		tu, ho := figs["tuning"][sys].mean(), figs["held_out"][sys].mean()
		fmt.Fprintf(&md, "| %s | %.3f | %.3f | %.3f | %.3f |\n", sys, tu.recall5, ho.recall5, tu.mrr, ho.mrr)
	}
	return md.String()
}

// assertPersonalTargets checks the held-out half against the acceptance targets.
func assertPersonalTargets(t *testing.T, h *halfFigures) {
	if got := float64(h.falseAbstain()) / float64(h.answerable()); got > personalMaxFalseAbstain {
		t.Errorf("held out: %d of %d answerable questions abstain (%.1f%%), the target is at most %.0f%%", h.falseAbstain(), h.answerable(), 100*got, 100*personalMaxFalseAbstain)
	}
	if got := float64(h.trueAbstain()) / float64(h.noAnswer()); got < personalMinAbstain {
		t.Errorf("held out: %d of %d no-answer questions abstain (%.1f%%), the target is at least %.0f%%", h.trueAbstain(), h.noAnswer(), 100*got, 100*personalMinAbstain)
	}
	if got := h.ranked.recall5 / float64(h.answerable()); got < personalMinRecall5 {
		t.Errorf("held out: recall@5 %.3f, the target is at least %.2f", got, personalMinRecall5)
	}
}
