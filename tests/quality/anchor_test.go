package quality

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The date anchor pool on the conversation corpus's temporal questions, per half: how
// many name a span the pool reads, what it added, and recall of the whole served
// ranking (the per-leg search: weighted, every candidate, no set expansion) with the
// pool's rows and without them. A row only the pool found carries a date score of 1
// and no leg's score; the ranking without the pool is the same ranking with those rows
// taken out (the pool inserts rows, it does not reorder the others). dated is the share
// of the expected turns the date anchor marked (lifted or added). The vector leg ranks
// every turn of a dialogue (each fits its pool), so the pool can add nothing there; the
// same search with the lexical and key legs alone, whose pools hold only the turns
// sharing a word with the question, shows what the pool reaches that the legs do not.

// anchorFigures are one half's temporal questions as the anchor pool met them.
type anchorFigures struct {
	questions, ran, added int
	with, without         figures
	dated, expected       int
	poolOnlyTop5          int // expected turns in the top 5 that only the pool found
}

// poolOnly reports whether only the anchor pool found a hit.
func poolOnly(h hit) bool {
	return h.Scores["date"] == 1 && h.Scores["vector"] == 0 && h.Scores["lexical"] == 0 && h.Scores["key"] == 0 && h.Scores["graph"] == 0
}

func convAnchor(outcomes []convOutcome, ranking func(convOutcome) answer) map[string]*anchorFigures {
	out := map[string]*anchorFigures{}
	for _, h := range convHalves {
		out[h] = &anchorFigures{}
	}
	for _, o := range outcomes {
		if o.q.Kind != "temporal" {
			continue
		}
		f := out[o.q.Half]
		f.questions++
		a := ranking(o)
		if a.Explain.Anchor.Status == "ran" {
			f.ran++
			f.added += a.Explain.Anchor.Added
		}
		relevant := relevantSet(o.q.Expected)
		f.with.add(servedAt(a.Hits, relevant))
		var kept []hit
		for i, h := range a.Hits {
			if relevant[h.MemoryKey] {
				if h.Scores["date"] == 1 {
					f.dated++
				}
				if poolOnly(h) && i < 5 {
					f.poolOnlyTop5++
				}
			}
			if !poolOnly(h) {
				kept = append(kept, h)
			}
		}
		f.expected += len(o.q.Expected)
		f.without.add(servedAt(kept, relevant))
	}
	return out
}

func anchorMarkdown(outcomes []convOutcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## The date anchor pool on the temporal questions\n\nThe per-leg search's whole ranking (weighted, every candidate, no set expansion) "+
		"with the pool's rows and with them taken out, with every leg and with the lexical and key legs alone; see anchor_test.go.\n\n"+
		"| legs | half | temporal questions | pool ran | rows added | recall@5 with | recall@5 without | MRR@10 with | MRR@10 without | expected turns dated | expected in top 5 only the pool found |\n"+
		"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, legs := range []struct {
		name    string
		ranking func(convOutcome) answer
	}{{"all", func(o convOutcome) answer { return o.all }}, {"lexical, key", func(o convOutcome) answer { return o.lexical }}} {
		figs := convAnchor(outcomes, legs.ranking)
		for _, h := range convHalves {
			f := figs[h]
			w, wo := f.with.mean(), f.without.mean()
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %d of %d | %d |\n", legs.name, h, f.questions, f.ran, f.added,
				w.recall5, wo.recall5, w.mrr, wo.mrr, f.dated, f.expected, f.poolOnlyTop5)
		}
	}
	return b.String()
}

// latencyMarkdown reports the weighted search's round trips as the suite's client saw
// them (four at a time, on a loaded machine): a reading, not a benchmark, and asserted
// nowhere; `loomd bench` measures latency.
func latencyMarkdown(outcomes []convOutcome) string {
	took := make([]time.Duration, 0, len(outcomes))
	for _, o := range outcomes {
		took = append(took, o.took)
	}
	slices.Sort(took)
	if len(took) == 0 {
		return ""
	}
	at := func(p float64) time.Duration { return took[min(len(took)-1, int(p*float64(len(took))))] }
	return fmt.Sprintf("\nThe weighted search's round trip in this run (%d searches, %d at a time, through HTTP): p50 %.1f ms, p95 %.1f ms.\n",
		len(took), workers, float64(at(0.5).Microseconds())/1000, float64(at(0.95).Microseconds())/1000)
}
