package projector

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/graph"
	"github.com/loomplane/loom/internal/tableset"
)

// The graph is a fold over each namespace's records in seq order (internal/graph), so
// a batch folds only records whose predecessors the graph already holds: the run of
// the batch's seqs that continues the namespace's watermark (re-folding any of it the
// watermark already covers, as a replay does). A record past a gap is left for its
// redelivery, which comes after the missing one. Before folding, the batch reads the
// graph's state as of just before its first record, so the rows it writes do not
// depend on what a replay or an earlier attempt of the batch wrote after that.

// nsGraph is one namespace's share of a batch's graph rows.
type nsGraph struct {
	org, namespace string
	rows           graph.Rows
}

// foldRange is the run of seqs a batch folds for one namespace: the run holding the
// seq after the watermark, else (a redelivery or a replay, all at or below it) the
// first run, when it starts no later than that. ok is false when the batch's seqs
// start past a gap. A jump (an erasure's seq) continues whatever precedes it, as it
// moves the watermark: the seqs it skips were withdrawn and never arrive.
func foldRange(seqs []int64, mark int64, jumps map[int64]bool) (from, to int64, ok bool) {
	s := append([]int64(nil), seqs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	type run struct{ from, to int64 }
	var runs []run
	for _, q := range s {
		if n := len(runs); n > 0 && (q <= runs[n-1].to+1 || jumps[q]) {
			runs[n-1].to = max(runs[n-1].to, q)
			continue
		}
		runs = append(runs, run{q, q})
	}
	for _, r := range runs {
		if (r.from <= mark+1 || jumps[r.from]) && mark+1 <= r.to {
			return r.from, r.to, true
		}
	}
	if len(runs) > 0 && runs[0].from <= mark+1 {
		return runs[0].from, runs[0].to, true
	}
	return 0, 0, false
}

// foldGraph folds each namespace's foldable records over the graph state it reads
// from set's tables (the links of the rows of every namespace at once, the rest a few
// namespaces at a time), and returns the rows to write.
func foldGraph(ctx context.Context, conn *ch.Conn, set tableset.Set, b batch, rows []opened, marks map[nsKey]int64) ([]nsGraph, error) {
	byNS := map[nsKey][]opened{}
	for _, o := range rows {
		k := nsKey{o.env.Org, o.env.Namespace}
		byNS[k] = append(byNS[k], o)
	}
	var jobs []nsKey
	recs := map[nsKey][]graph.Record{}
	for k, os := range byNS {
		from, to, ok := foldRange(b.seqs[k], marks[k], b.jumps[k])
		if !ok {
			continue
		}
		sort.Slice(os, func(i, j int) bool { return os[i].env.Seq < os[j].env.Seq })
		var last int64
		for _, o := range os {
			if o.env.Seq < from || o.env.Seq > to || o.env.Seq == last {
				continue // outside the run, or a second copy of a record
			}
			last = o.env.Seq
			recs[k] = append(recs[k], graph.RecordOf(o.env, o.content))
		}
		if len(recs[k]) > 0 {
			jobs = append(jobs, k)
		}
	}
	states, err := loadRowLinks(ctx, conn, set, jobs, recs)
	if err != nil {
		return nil, fmt.Errorf("read the graph of the batch's rows: %w", err)
	}
	out := make([]nsGraph, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, k := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			st, err := loadGraphState(ctx, conn, states[k], k, recs[k])
			if err != nil {
				errs[i] = fmt.Errorf("read the graph of %s/%s: %w", k.org, k.namespace, err)
				return
			}
			out[i] = nsGraph{org: k.org, namespace: k.namespace}
			for _, r := range recs[k] {
				st.Apply(r, &out[i].rows)
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}
