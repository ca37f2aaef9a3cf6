package workers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

// labelledPair is two statements of one user, the second written after the first, and
// what a person labelled them.
type labelledPair struct {
	label         string // update, restatement, different
	first, second string
}

// labelledPairs builds n pairs of each label.
func labelledPairs(n int) []labelledPair {
	var out []labelledPair
	for i := 0; i < n; i++ {
		u := fmt.Sprintf("user%d", i)
		out = append(out,
			labelledPair{"update", u + "'s employer is Acme Corp in Lisbon", u + "'s employer is Globex Corp in Lisbon"},
			labelledPair{"restatement", u + " prefers a window seat on every flight", u + " prefers a window seat on each flight"},
			labelledPair{"different", u + "'s sister lives in Oslo and works as a nurse", u + "'s brother lives in Oslo and works as a nurse"})
	}
	return out
}

// BenchmarkResolverLabelledPairs writes a labelled set of pairs (updates,
// restatements, different entities) under auto_reinforce and lets the resolver judge
// them against a scripted judge that answers each pair's label, at confidences on
// both sides of the thresholds for updates. It reports the rows judged per second
// (from the first row queued to the last judged), the calls per judged row, and the
// false actions per pair: a retirement or flag of a pair not labelled update, or an
// update answered at 0.98 or more and not retired.
//
//	flock /tmp/loom-heavy.lock go test ./tests/workers -run '^$' -bench ResolverLabelledPairs -benchtime 1x
func BenchmarkResolverLabelledPairs(b *testing.B) {
	const org = "labelled"
	// The pairs are written with no resolver running, then one starts at the topic
	// from before the writes: it judges the whole set at its own pace.
	w := startWorkers(b, org, nil, nil)
	labelOf := map[string]labelledPair{}
	pairs := labelledPairs(10)
	for _, p := range pairs {
		labelOf[p.first], labelOf[p.second] = p, p
	}
	updateConfidence := []float64{0.99, 0.985, 0.97, 0.93}
	judge := newScriptedJudge(w.srv, func(newValue, peer string) (string, float64) {
		p, ok := labelOf[newValue]
		if !ok || labelOf[peer] != p {
			return "unrelated", 0.99
		}
		switch p.label {
		case "update":
			var i int
			fmt.Sscanf(newValue, "user%d", &i)
			return "update", updateConfidence[i%len(updateConfidence)]
		case "restatement":
			return "restatement", 0.97
		}
		return "unrelated", 0.97
	}, nil)
	pool := env.PG(b)
	var judged, calls, pairsJudged, falseActions, updatesRetired, updatesFlagged int
	var took time.Duration
	for n := 0; n < b.N; n++ {
		callsBefore, from := len(judge.calls()), time.Now().UTC()
		// Each pair in a namespace of its own: the write side's conflict check reads the
		// whole namespace, where the pairs' templates would flag each other.
		base := testenv.Unique(b, "labelled")
		nsOf := func(i int) string { return fmt.Sprintf("%s-%d", base, i) }
		for i, p := range pairs {
			ns := nsOf(i)
			id := client.Identity{UserID: fmt.Sprintf("%s-%d", p.label, i)}
			set(b, w.tc, ns, fmt.Sprintf("p%d-a", i), p.first, id)
			set(b, w.tc, ns, fmt.Sprintf("p%d-b", i), p.second, id)
		}
		w.names = []string{resolverWorker}
		w.replay(from.Format(time.RFC3339Nano))
		drained(b, pool, resolverWorker, org)
		w.names = nil
		w.replay(from.Format(time.RFC3339Nano))
		// The resolver's own pace: from the first row queued to the last judged.
		var n int
		var secs float64
		if err := pool.QueryRow(context.Background(), `SELECT count(*), coalesce(extract(epoch FROM max(done_at) - min(queued_at)), 0)::float8
			FROM loom.worker_items WHERE worker = $1 AND org = $2 AND outcome = 'judged' AND starts_with(namespace, $3)`,
			resolverWorker, org, base+"-").Scan(&n, &secs); err != nil {
			b.Fatal(err)
		}
		judged, took = judged+n, took+time.Duration(secs*float64(time.Second))
		calls += len(judge.calls()) - callsBefore
		for i, p := range pairs {
			ns, id := nsOf(i), client.Identity{UserID: fmt.Sprintf("%s-%d", p.label, i)}
			a, second := get(b, w.tc, ns, fmt.Sprintf("p%d-a", i), id), get(b, w.tc, ns, fmt.Sprintf("p%d-b", i), id)
			c, asked := judge.verdict(p.second, p.first)
			if asked {
				pairsJudged++
			}
			retired, flagged := a.Status == "superseded", a.Status == "conflicted" || second.Status == "conflicted"
			if p.label == "update" && retired {
				updatesRetired++
			} else if p.label == "update" && flagged {
				updatesFlagged++
			}
			switch {
			case p.label != "update" && (retired || flagged):
				falseActions++
				b.Logf("false action on a %s pair: %s / %s", p.label, a.Status, second.Status)
			case p.label == "update" && asked && c.confidence >= 0.98 && !retired:
				falseActions++
				b.Logf("an update at %.3f not retired: %s / %s", c.confidence, a.Status, second.Status)
			}
		}
	}
	total := len(pairs) * b.N
	b.ReportMetric(float64(judged)/took.Seconds(), "rows_judged/s")
	b.ReportMetric(float64(calls)/float64(max(judged, 1)), "calls/judged_row")
	b.ReportMetric(float64(falseActions)/float64(total), "false_actions/pair")
	b.ReportMetric(float64(pairsJudged)/float64(total), "pairs_judged/pair")
	b.Logf("%d pairs (a third each update, restatement, different): %d rows judged in %s with %d calls; updates retired %d, flagged %d; false actions %d",
		total, judged, took.Round(time.Millisecond), calls, updatesRetired, updatesFlagged, falseActions)
}
