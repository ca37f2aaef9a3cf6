package quality

import (
	"math"
	"sort"
	"sync"
	"testing"
)

// The figures every quality suite reports: recall@5, recall@10 and MRR@10 of a ranking,
// as served or as a leg's expected value over its ties, and abstain precision and
// recall. One place, so the suites' figures are computed alike.

// figures are one system's scores over a set of queries: sums while adding, means after.
type figures struct {
	recall5, recall10, mrr float64
	n                      int
}

func (f *figures) add(r5, r10, rr float64) {
	f.recall5 += r5
	f.recall10 += r10
	f.mrr += rr
	f.n++
}

func (f figures) mean() figures {
	if f.n == 0 {
		return f
	}
	return figures{f.recall5 / float64(f.n), f.recall10 / float64(f.n), f.mrr / float64(f.n), f.n}
}

// abstainFigures count a search's abstentions: precision is the share of them that
// fell on no-answer queries, recall the share of no-answer queries that abstained.
type abstainFigures struct {
	abstained, correct, noAnswer int
}

// count adds one query: whether it had no answer, and whether the search abstained.
func (a *abstainFigures) count(noAnswer, abstained bool) {
	if noAnswer {
		a.noAnswer++
	}
	if abstained {
		a.abstained++
		if noAnswer {
			a.correct++
		}
	}
}

func (a abstainFigures) precision() float64 { return ratio(a.correct, a.abstained) }
func (a abstainFigures) recall() float64    { return ratio(a.correct, a.noAnswer) }

func ratio(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// relevantSet is a query's expected keys as a set.
func relevantSet(expected []string) map[string]bool {
	relevant := make(map[string]bool, len(expected))
	for _, k := range expected {
		relevant[k] = true
	}
	return relevant
}

// servedAt scores a ranking as served: recall@5, recall@10 and the reciprocal rank of
// the first relevant hit within the top ten.
func servedAt(hits []hit, relevant map[string]bool) (r5, r10, rr float64) {
	for i, h := range hits {
		if !relevant[h.MemoryKey] {
			continue
		}
		if i < 5 {
			r5++
		}
		if i < 10 {
			r10++
		}
		if rr == 0 && i < 10 {
			rr = 1 / float64(i+1)
		}
	}
	n := float64(len(relevant))
	return r5 / n, r10 / n, rr
}

// tiedAt scores one ranking of the rows with a non-zero score under name (a leg's, or a
// baseline's "score"), as the expected value over a random order within each group of
// equal scores.
func tiedAt(hits []hit, name string, relevant map[string]bool) (r5, r10, rr float64) {
	type row struct {
		score    float64
		relevant bool
	}
	var rows []row
	for _, h := range hits {
		if s := h.Scores[name]; s != 0 {
			rows = append(rows, row{s, relevant[h.MemoryKey]})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].score > rows[j].score })
	above := 0 // rows ranked strictly above the current tie group
	rrDone := false
	for i := 0; i < len(rows); {
		j, rel := i, 0
		for j < len(rows) && rows[j].score == rows[i].score {
			if rows[j].relevant {
				rel++
			}
			j++
		}
		size := j - i
		if rel > 0 {
			// Each relevant row of the group lands in the top k with probability
			// (slots left)/(group size).
			r5 += float64(rel) * math.Max(0, math.Min(1, float64(5-above)/float64(size)))
			r10 += float64(rel) * math.Max(0, math.Min(1, float64(10-above)/float64(size)))
			if !rrDone {
				// The first relevant row's position in the group is pos with
				// P = C(size-pos, rel-1) / C(size, rel).
				for pos := 1; pos <= size-rel+1 && above+pos <= 10; pos++ {
					p := math.Exp(logChoose(size-pos, rel-1) - logChoose(size, rel))
					rr += p / float64(above+pos)
				}
				rrDone = true
			}
		}
		above += size
		i = j
	}
	n := float64(len(relevant))
	return r5 / n, r10 / n, rr
}

func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// eachInParallel runs do(0) … do(n-1) on workers goroutines and fails the test with
// every error any returned, once all have run.
func eachInParallel(t *testing.T, n, workers int, do func(i int) error) {
	t.Helper()
	jobs := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := do(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
