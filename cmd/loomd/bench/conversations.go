package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/corpus"
)

// convGateP50MS is issue 34's latency target for search over the conversation
// benchmark: p50 at most 10 ms.
const convGateP50MS = 10

// convQuestion is one question as the scenario asks it: its dialogue's namespace and
// exact scan, its request and its vector.
type convQuestion struct {
	half     string
	ns       string
	scan     *exactScan
	req      client.SearchRequest
	vector   []float32
	expected []string
}

// conversations measures memory.search over the quality suite's conversation corpus as
// issue 34's conversation benchmark does: every turn a memory with valid_at at its
// session's time, each dialogue a namespace of its own, the corpus's own questions
// (with their reference_time), top_k 10, default settings. Beside it, the bare exact
// scan of the dialogue's vectors; outside the clock, each half's recall@5 and
// abstentions, so the latency is read beside the quality it buys.
func (r *runner) conversations(ctx context.Context) (*ScenarioResult, error) {
	c, err := corpus.ReadConversations(r.opts.Conversations)
	if err != nil {
		return nil, fmt.Errorf("%w (--conversations, tests/quality/conversations.json from the repository's root)", err)
	}
	res := &ScenarioResult{
		Title: fmt.Sprintf("memory.search over the conversation corpus, top_k %d", searchTopK),
		Baseline: fmt.Sprintf("a bare in-process exact scan of the question's dialogue (float32 dot product of every turn's vector with the "+
			"question's, top %d, no filters, no other legs, no HTTP); query vectors are embedded before the clock starts", searchTopK),
		Notes: []string{fmt.Sprintf("corpus: %s (tests/quality/genconv, seed 34): every turn written with memory.bulk_set and valid_at at its "+
			"session's time, each dialogue in an append_only namespace of its own; each call asks one of the corpus's questions, drawn at "+
			"random, with its reference_time; the gate is issue 34's (p50 ≤ %d ms)", r.opts.Conversations, convGateP50MS),
			"recall@5 is the share of a question's expected turns among the first five hits, averaged over the half's answerable questions; " +
				"a search abstains when its verdict is not ok (the quality suite's RESULTS-conversations.md has the same figures beside BM25 and each leg)"},
	}
	questions, err := r.loadConversations(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := r.convQuality(ctx, res, questions); err != nil {
		return nil, err
	}
	for _, conc := range r.levels(1, 5) {
		name := fmt.Sprintf("%d dialogues, %d questions, concurrency=%d", len(c.Dialogues), len(questions), conc)
		if err := r.measureConversations(ctx, res, questions, name, conc); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// measureConversations measures the questions' searches at concurrency conc beside the
// bare exact scan, and the same searches with the additive pools off (set expansion and
// the date anchor pool: the round trips a question about a named entity or a date
// adds), each with its CPU per search.
func (r *runner) measureConversations(ctx context.Context, res *ScenarioResult, questions []convQuestion, name string, conc int) error {
	rands := r.workerRands(conc)
	searching := func(pools bool) func(ctx context.Context, w, _ int) error {
		return func(ctx context.Context, w, _ int) error {
			q := questions[rands[w].IntN(len(questions))]
			req := q.req
			if !pools {
				off := false
				req.SetExpansion, req.AnchorPool = &off, &off
			}
			_, err := r.api.Search(ctx, q.ns, req)
			return err
		}
	}
	before := readCPU()
	loom, err := r.closedLoop(ctx, "memory.search "+name, conc, r.opts.Duration, searching(true))
	if err != nil {
		return err
	}
	used := readCPU().sub(before)
	before = readCPU()
	noPools, err := r.closedLoop(ctx, "memory.search, set expansion and the anchor pool off, "+name, conc, r.opts.Duration, searching(false))
	if err != nil {
		return err
	}
	usedNoPools := readCPU().sub(before)
	bare, err := r.closedLoop(ctx, "bare in-process exact scan "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
		q := questions[rands[w].IntN(len(questions))]
		q.scan.top(q.vector, searchTopK)
		return nil
	})
	if err != nil {
		return err
	}
	p50 := res.compare(name, loom, bare, "searches/s")
	p50.Gate = fmt.Sprintf("p50 ≤ %d ms: %s", convGateP50MS, passFail(loom.P50MS <= convGateP50MS))
	res.add(name, "p50 ms, set expansion and the anchor pool off", noPools.P50MS, bare.P50MS)
	// CPU per search moves less with the neighbours' load than the wall clock does; the
	// processes' work at rest (the workers' passes, ClickHouse's merges) is in it, as its
	// bursts make a rate measured before a poor thing to take out.
	per := func(d time.Duration, s Sample) float64 {
		return round(float64(d.Microseconds())/1000/float64(max(s.Calls+s.Errors, 1)), 2)
	}
	res.add(name, "CPU ms per search: this process (Loom, its workers, the bench's client), pools on (baseline: off)", per(used.self, loom), per(usedNoPools.self, noPools))
	if used.tree > 0 {
		res.add(name, "CPU ms per search: with the embedded stores, pools on (baseline: off)", per(used.tree, loom), per(usedNoPools.tree, noPools))
	}
	return nil
}

// loadConversations writes every dialogue to a namespace of its own, waits until the
// index serves each, and returns the questions ready to ask.
func (r *runner) loadConversations(ctx context.Context, c corpus.Conversations) ([]convQuestion, error) {
	nsOf := map[string]string{}
	scans := map[string]*exactScan{}
	for _, d := range c.Dialogues {
		ns := r.namespace("conv", d.ID)
		nsOf[d.ID] = ns
		if err := r.appendOnly(ctx, ns); err != nil {
			return nil, err
		}
		var entries []client.BulkEntry
		var values []string
		for _, s := range d.Sessions {
			for _, t := range s.Turns {
				entries = append(entries, client.BulkEntry{Key: t.Key, Value: t.Value, ValidAt: t.ValidAt})
				values = append(values, t.Value)
			}
		}
		for from := 0; from < len(entries); from += 1000 {
			batch := entries[from:min(from+1000, len(entries))]
			if err := r.retrying(ctx, func() error {
				ans, err := r.api.BulkSet(ctx, ns, client.BulkSetRequest{Entries: batch}, client.IdempotencyKey(fmt.Sprintf("%s-%d", ns, from)))
				if err == nil && len(ans.Written) != len(batch) {
					err = fmt.Errorf("bulk_set wrote %d of %d turns", len(ans.Written), len(batch))
				}
				return err
			}); err != nil {
				return nil, fmt.Errorf("load dialogue %s: %w", d.ID, err)
			}
		}
		if err := r.waitProjected(ctx, ns); err != nil {
			return nil, err
		}
		if _, err := r.settleIndex(ctx, ns); err != nil {
			return nil, err
		}
		var err error
		if scans[d.ID], err = r.exactScanOf(ctx, values); err != nil {
			return nil, err
		}
	}
	r.progress("  %d dialogues loaded", len(c.Dialogues))
	texts := make([]string, len(c.Questions))
	for i, q := range c.Questions {
		texts[i] = q.Query
	}
	vectors, err := r.t.Process.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("embed the questions: %w", err)
	}
	out := make([]convQuestion, len(c.Questions))
	for i, q := range c.Questions {
		if nsOf[q.Dialogue] == "" {
			return nil, fmt.Errorf("question %q names dialogue %q, which the corpus does not hold", q.Query, q.Dialogue)
		}
		at, err := q.ReferenceAt()
		if err != nil {
			return nil, err
		}
		out[i] = convQuestion{half: q.Half, ns: nsOf[q.Dialogue], scan: scans[q.Dialogue], vector: vectors[i], expected: q.Expected,
			req: client.SearchRequest{Query: q.Query, TopK: searchTopK, ReferenceTime: at}}
	}
	return out, nil
}

// convQuality asks every question once, outside the clock, and adds each half's
// recall@5 and abstentions to res.
func (r *runner) convQuality(ctx context.Context, res *ScenarioResult, questions []convQuestion) error {
	type half struct {
		recall5  float64
		verdicts verdictCounts
	}
	halves := map[string]*half{}
	var order []string
	for _, q := range questions {
		ans, err := r.api.Search(ctx, q.ns, q.req)
		if err != nil {
			return fmt.Errorf("search %s for %q: %w", q.ns, q.req.Query, err)
		}
		h := halves[q.half]
		if h == nil {
			h = &half{}
			halves[q.half] = h
			order = append(order, q.half)
		}
		abstained := ans.Verdict != client.VerdictOK
		if len(q.expected) == 0 {
			h.verdicts.noAnswer++
			if abstained {
				h.verdicts.trueAbstain++
			}
			continue
		}
		h.verdicts.answerable++
		if abstained {
			h.verdicts.falseAbstain++
		}
		found := 0
		for i, hit := range ans.Hits {
			for _, k := range q.expected {
				if i < 5 && hit.MemoryKey == k {
					found++
				}
			}
		}
		h.recall5 += float64(found) / float64(len(q.expected))
	}
	for _, name := range order {
		h := halves[name]
		v := h.verdicts
		c := fmt.Sprintf("%s half, %d answerable and %d no-answer questions", name, v.answerable, v.noAnswer)
		res.Rows = append(res.Rows, plainRow(c, "recall@5", round(h.recall5/float64(max(v.answerable, 1)), 3)),
			plainRow(c, "answerable abstained", float64(v.falseAbstain)),
			plainRow(c, "no-answer abstained", float64(v.trueAbstain)),
			plainRow(c, "abstain precision", round(v.precision(), 3)),
			plainRow(c, "abstain recall", round(v.recall(), 3)))
	}
	return nil
}
