package quality

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/corpus"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/tests/testenv"
)

//go:generate go run ./genconv -seed 34 -out conversations.json

// The conversation corpus (conversations.json, written by ./genconv from a seed; see
// its doc comment) is eight dialogues of six dated sessions each, every turn a memory
// with valid_at at its time, each dialogue in a namespace of its own, and questions of
// four kinds: single_hop, temporal, multi_hop and no_answer. Dialogues 1–4 are the
// tuning half, 5–8 the held-out half: any weight, threshold or word list the search
// reads may be chosen by looking at the tuning half's figures; the held-out half is
// only measured.
//
// Systems, all over the same turns in the same run:
//   - the fused searches as served (top_k 10): weighted, rrf, weighted with sub-queries;
//   - each leg alone, re-ranked from one search with top_k above the dialogue's size
//     and set expansion off (see the comment atop quality_test.go);
//   - the weighted search with set expansion off (set_expansion: false);
//   - plain BM25 (lower-cased words, no stemming, no stop words, k1 1.2, b 0.75) over
//     the turns' text, computed here;
//   - the exact vector scan: every turn's cosine to the query under the built-in hash
//     embedder, over the text the service embeds (memrow.EmbedText), computed here.
//
// recall@k is the share of a question's expected turns in the top k, averaged over the
// answerable questions; a multi-hop question expects two turns. A search abstains
// when its verdict is not ok; precision is the share of abstentions on no-answer
// questions, recall the share of no-answer questions that abstained.

var (
	convKinds   = []string{"single_hop", "temporal", "multi_hop"}
	convHalves  = []string{"tuning", "held_out"}
	convBM25    = "plain BM25"
	convExact   = "exact vector scan"
	convNoExp   = "fused weighted, no set expansion"
	convSystems = []string{sysVector, sysLexical, sysKey, convBM25, convExact, convNoExp, sysWeighted, sysRRF, sysSubQ}
)

// convOutcome is what one question's searches answered.
type convOutcome struct {
	q                        corpus.Question
	weighted, rrf, subq, all answer
	noExp                    answer        // weighted with set_expansion off
	took                     time.Duration // the weighted search's round trip, as the client saw it
	lexical                  answer        // a temporal question's per-leg search with the lexical and key legs alone
	bm25, exact              []hit         // ranked by the baselines' own score (Scores["score"])
}

func TestConversations(t *testing.T) {
	c := readConversations(t)
	client := startConversationsAPI(t)
	nsOf, docs := writeConversations(t, client, c)
	ctx := context.Background()
	hash := embed.NewHash(embed.DefaultHashDim)
	baselines := map[string]*convBaselines{}
	for id, ds := range docs {
		baselines[id] = newConvBaselines(ctx, t, hash, ds)
	}
	// The first search of each namespace waits at the barrier for its projection.
	waitForProjections(ctx, t, client, mapValues(nsOf))

	outcomes := make([]convOutcome, len(c.Questions))
	eachInParallel(t, len(c.Questions), workers, func(i int) error {
		q := c.Questions[i]
		o, err := askConversation(ctx, client, nsOf[q.Dialogue], q)
		if err != nil {
			return fmt.Errorf("%s %q: %w", q.ID, q.Query, err)
		}
		o.bm25, o.exact = baselines[q.Dialogue].rank(ctx, hash, q.Query)
		outcomes[i] = o
		return nil
	})

	report := convMeasure(outcomes)
	md := report.markdown(c, len(c.Questions)) + anchorMarkdown(outcomes) + latencyMarkdown(outcomes)
	if os.Getenv("LOOM_QUALITY_VERBOSE") == "1" {
		var log strings.Builder
		for _, o := range outcomes {
			fmt.Fprintf(&log, "%s %-10s %-60q verdict=%s ranks weighted=%v no-expansion=%v bm25=%v\n", o.q.ID, o.q.Kind, o.q.Query, o.weighted.Verdict,
				ranksOf(o.weighted.Hits, o.q.Expected), ranksOf(o.noExp.Hits, o.q.Expected), ranksOf(o.bm25, o.q.Expected))
		}
		t.Log("\n" + log.String())
	}
	logAndWriteResults(t, "RESULTS-conversations.md", md)
	assertConversationsBeatBaselines(t, report)
}

// readConversations reads the conversation corpus the measurement runs.
func readConversations(t *testing.T) corpus.Conversations {
	c, err := corpus.ReadConversations("conversations.json")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startConversationsAPI starts the API process with top_k raised to allTopK, so the
// per-leg re-ranking can read every row of a dialogue.
func startConversationsAPI(t *testing.T) *testenv.Client {
	n, url := env.API(t, func(cfg *config.Config) {
		cfg.SearchIndex.Mode = config.SearchIndexMemory
		cfg.Query.TopKMax = allTopK
		cfg.Query.ProjectionWait = 60 * time.Second
	})
	return testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "conversations"}))
}

// writeConversations writes each dialogue's turns to a namespace of its own, checking
// every turn was written, and keeps the turns as the baselines read them; it returns
// the namespaces and the baselines' documents by dialogue.
func writeConversations(t *testing.T, client *testenv.Client, c corpus.Conversations) (map[string]string, map[string][]convDoc) {
	nsOf := map[string]string{}
	docs := map[string][]convDoc{}
	for _, d := range c.Dialogues {
		ns := testenv.Unique(t, "conv-"+d.ID)
		nsOf[d.ID] = ns
		client.AppendOnly(t, ns)
		var entries []map[string]any
		for _, s := range d.Sessions {
			for _, turn := range s.Turns {
				entries = append(entries, map[string]any{"key": turn.Key, "value": turn.Value, "valid_at": turn.ValidAt})
				canonical, _ := json.Marshal(turn.Value)
				docs[d.ID] = append(docs[d.ID], convDoc{key: turn.Key, text: turn.Value, embedText: memrow.EmbedText(turn.Key, canonical)})
			}
		}
		body, _ := json.Marshal(map[string]any{"entries": entries})
		r := client.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:bulkSet", body)
		if r.Status != http.StatusOK {
			t.Fatalf("bulk_set %s: %d %s", d.ID, r.Status, r.Body)
		}
		var a struct {
			Written []any `json:"written"`
		}
		json.Unmarshal(r.Body, &a)
		if len(a.Written) != len(entries) {
			t.Fatalf("bulk_set %s wrote %d of %d turns: %s", d.ID, len(a.Written), len(entries), r.Body)
		}
	}
	return nsOf, docs
}

// askConversation runs one question's served searches in ns, in order, stopping at the
// first error; the baselines' rankings are left to the caller.
func askConversation(ctx context.Context, client *testenv.Client, ns string, q corpus.Question) (convOutcome, error) {
	more := map[string]any{}
	if q.ReferenceTime != "" {
		more["reference_time"] = q.ReferenceTime
	}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range more {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	o := convOutcome{q: q}
	var err error
	start := time.Now()
	o.weighted, err = search(ctx, client, ns, q.Query, fusedTopK, "weighted", more)
	o.took = time.Since(start)
	if err == nil {
		if o.rrf, err = search(ctx, client, ns, q.Query, fusedTopK, "rrf", more); err == nil {
			if o.subq, err = search(ctx, client, ns, q.Query, fusedTopK, "weighted", with(map[string]any{"sub_queries": true})); err == nil {
				if o.all, err = search(ctx, client, ns, q.Query, allTopK, "weighted", with(map[string]any{"set_expansion": false})); err == nil {
					o.noExp, err = search(ctx, client, ns, q.Query, fusedTopK, "weighted", with(map[string]any{"set_expansion": false}))
					if err == nil && q.Kind == "temporal" {
						o.lexical, err = search(ctx, client, ns, q.Query, allTopK, "weighted", with(map[string]any{"set_expansion": false, "legs": []string{"lexical", "key"}}))
					}
				}
			}
		}
	}
	return o, err
}

// assertConversationsBeatBaselines checks the acceptance: the served search beats plain
// BM25 on both halves (what the public benchmark measured first), and every leg alone.
func assertConversationsBeatBaselines(t *testing.T, report convReport) {
	for _, half := range convHalves {
		w := report.overall[half][sysWeighted]
		for _, other := range []string{convBM25, sysVector, sysLexical, sysKey} {
			if o := report.overall[half][other]; w.recall5 <= o.recall5 {
				t.Errorf("%s: fused weighted recall@5 %.3f does not beat %s's %.3f", half, w.recall5, other, o.recall5)
			}
		}
	}
}

func ranksOf(hits []hit, expected []string) []int {
	var out []int
	for _, k := range expected {
		r := 0
		for i, h := range hits {
			if h.MemoryKey == k {
				r = i + 1
				break
			}
		}
		out = append(out, r)
	}
	return out
}

// convDoc is one turn as the baselines read it.
type convDoc struct {
	key, text, embedText string
}

// convBaselines are one dialogue's plain BM25 statistics and exact vectors.
type convBaselines struct {
	docs    []convDoc
	terms   []map[string]int
	lengths []float64
	avgLen  float64
	df      map[string]int
	vectors [][]float32
}

var plainWordRE = regexp.MustCompile(`[\p{L}\p{N}]+`)

func plainTerms(s string) []string { return plainWordRE.FindAllString(strings.ToLower(s), -1) }

func newConvBaselines(ctx context.Context, t *testing.T, hash *embed.Hash, docs []convDoc) *convBaselines {
	b := &convBaselines{docs: docs, df: map[string]int{}}
	texts := make([]string, len(docs))
	for i, d := range docs {
		tf := map[string]int{}
		words := plainTerms(d.text)
		for _, w := range words {
			tf[w]++
		}
		for w := range tf {
			b.df[w]++
		}
		b.terms = append(b.terms, tf)
		b.lengths = append(b.lengths, float64(len(words)))
		b.avgLen += float64(len(words))
		texts[i] = d.embedText
	}
	b.avgLen /= float64(len(docs))
	vs, err := hash.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	b.vectors = vs
	return b
}

// rank ranks every turn by plain BM25 and by its exact cosine to the query.
func (b *convBaselines) rank(ctx context.Context, hash *embed.Hash, query string) (bm25, exact []hit) {
	const k1, bb = 1.2, 0.75
	n := float64(len(b.docs))
	qv, _ := hash.Embed(ctx, []string{query})
	for i, d := range b.docs {
		score := 0.0
		for _, w := range dedupeStrings(plainTerms(query)) {
			tf := float64(b.terms[i][w])
			if tf == 0 {
				continue
			}
			df := float64(b.df[w])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			score += idf * tf * (k1 + 1) / (tf + k1*(1-bb+bb*b.lengths[i]/b.avgLen))
		}
		if score > 0 {
			bm25 = append(bm25, hit{MemoryKey: d.key, Scores: map[string]float64{"score": score}})
		}
		exact = append(exact, hit{MemoryKey: d.key, Scores: map[string]float64{"score": cosine(qv[0], b.vectors[i])}})
	}
	for _, l := range [][]hit{bm25, exact} {
		sort.SliceStable(l, func(i, j int) bool { return l[i].Scores["score"] > l[j].Scores["score"] })
	}
	return bm25, exact
}

func dedupeStrings(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

type convReport struct {
	overall  map[string]map[string]figures            // half → system
	perKind  map[string]map[string]map[string]figures // half → kind → system
	abstain  map[string]map[string]abstainFigures     // half → fused system
	falseAbs map[string]map[string]map[string]int     // half → fused system → kind → answerable abstained
	count    map[string]map[string]int                // half → kind → questions
}

func convMeasure(outcomes []convOutcome) convReport {
	r := convReport{overall: map[string]map[string]figures{}, perKind: map[string]map[string]map[string]figures{},
		abstain: map[string]map[string]abstainFigures{}, falseAbs: map[string]map[string]map[string]int{}, count: map[string]map[string]int{}}
	for _, h := range convHalves {
		r.overall[h] = map[string]figures{}
		r.perKind[h] = map[string]map[string]figures{}
		for _, k := range convKinds {
			r.perKind[h][k] = map[string]figures{}
		}
		r.abstain[h] = map[string]abstainFigures{}
		r.falseAbs[h] = map[string]map[string]int{}
		for _, sys := range fusedSystems {
			r.falseAbs[h][sys] = map[string]int{}
		}
		r.count[h] = map[string]int{}
	}
	for _, o := range outcomes {
		h := o.q.Half
		r.count[h][o.q.Kind]++
		none := len(o.q.Expected) == 0
		for sys, a := range map[string]answer{sysWeighted: o.weighted, sysRRF: o.rrf, sysSubQ: o.subq} {
			ab := r.abstain[h][sys]
			ab.count(none, a.Verdict != "ok")
			r.abstain[h][sys] = ab
			if !none && a.Verdict != "ok" {
				r.falseAbs[h][sys][o.q.Kind]++
			}
		}
		if none {
			continue
		}
		relevant := relevantSet(o.q.Expected)
		for _, sys := range convSystems {
			var r5, r10, rr float64
			switch sys {
			case sysWeighted:
				r5, r10, rr = servedAt(o.weighted.Hits, relevant)
			case sysRRF:
				r5, r10, rr = servedAt(o.rrf.Hits, relevant)
			case sysSubQ:
				r5, r10, rr = servedAt(o.subq.Hits, relevant)
			case convNoExp:
				r5, r10, rr = servedAt(o.noExp.Hits, relevant)
			case convBM25:
				r5, r10, rr = tiedAt(o.bm25, "score", relevant)
			case convExact:
				r5, r10, rr = tiedAt(o.exact, "score", relevant)
			default:
				r5, r10, rr = tiedAt(o.all.Hits, legOf[sys], relevant)
			}
			f := r.overall[h][sys]
			f.add(r5, r10, rr)
			r.overall[h][sys] = f
			pk := r.perKind[h][o.q.Kind][sys]
			pk.add(r5, r10, rr)
			r.perKind[h][o.q.Kind][sys] = pk
		}
	}
	for _, h := range convHalves {
		for sys, f := range r.overall[h] {
			r.overall[h][sys] = f.mean()
		}
		for _, k := range convKinds {
			for sys, f := range r.perKind[h][k] {
				r.perKind[h][k][sys] = f.mean()
			}
		}
	}
	return r
}

func (r convReport) markdown(c corpus.Conversations, questions int) string {
	turns := 0
	for _, d := range c.Dialogues {
		for _, s := range d.Sessions {
			turns += len(s.Turns)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Conversations: multi-session dialogues with dated turns\n\nWritten by `LOOM_QUALITY_WRITE=1 go test -count=1 -p 1 -run TestConversations ./tests/quality/`. "+
		"Corpus: tests/quality/conversations.json, generated by tests/quality/genconv with seed %d: %d dialogues (each in its own namespace), %d turns "+
		"written as memories with valid_at at their session's time, %d questions. Dialogues 1–4 are the tuning half, 5–8 the held-out half "+
		"(measured, never tuned on). Default configuration, the built-in hash embedder. Method: see the comment atop conversation_test.go; "+
		"every baseline ran over the same turns in the same run.\n", c.Seed, len(c.Dialogues), turns, questions)
	for _, h := range convHalves {
		fmt.Fprintf(&b, "\n## %s half: %d single_hop, %d temporal, %d multi_hop, %d no_answer\n\n", h, r.count[h]["single_hop"], r.count[h]["temporal"],
			r.count[h]["multi_hop"], r.count[h]["no_answer"])
		fmt.Fprintf(&b, "| system | recall@5 | recall@10 | MRR@10 | single_hop r@5 | temporal r@5 | multi_hop r@5 | multi_hop r@10 |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, sys := range convSystems {
			f := r.overall[h][sys]
			fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", sys, f.recall5, f.recall10, f.mrr,
				r.perKind[h]["single_hop"][sys].recall5, r.perKind[h]["temporal"][sys].recall5, r.perKind[h]["multi_hop"][sys].recall5,
				r.perKind[h]["multi_hop"][sys].recall10)
		}
		fmt.Fprintf(&b, "\n| search | abstained | of them no-answer | abstain precision | abstain recall | answerable abstained |\n|---|---:|---:|---:|---:|---|\n")
		for _, sys := range fusedSystems {
			a := r.abstain[h][sys]
			var parts []string
			for _, k := range convKinds {
				if n := r.falseAbs[h][sys][k]; n > 0 {
					parts = append(parts, fmt.Sprintf("%s %d", k, n))
				}
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s |\n", sys, a.abstained, a.correct, pct(a.precision()), pct(a.recall()), strings.Join(parts, ", "))
		}
	}
	return b.String()
}
