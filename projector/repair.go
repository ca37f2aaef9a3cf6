package projector

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/periodic"
)

// RepairResult is what one repair pass did.
type RepairResult struct {
	Repaired int // recorded failures applied
	Failing  int // recorded failures that failed again, or are no longer on the topic
}

// Repair retries the projection's recorded failures once: it reads the records back
// from the topic by their place, and applies each held namespace's records in seq
// order, oldest failure first, up to BatchRows records a pass. A namespace whose
// records apply is released (its failures resolved, its watermark moved on); one whose
// records fail again keeps them, with one more attempt and the new reason. A
// transient error (a store unreachable) ends the pass.
func (p *Projector) Repair(ctx context.Context, brokers []string) (RepairResult, error) {
	var res RepairResult
	fs, err := listFailures(ctx, p.pool, p.cfg.Name, p.cfg.BatchRows)
	if err != nil || len(fs) == 0 {
		return res, err
	}
	found, err := readFailed(ctx, brokers, fs)
	if err != nil {
		return res, err
	}
	var order []nsKey
	shares := map[nsKey][]failure{}
	for _, f := range fs {
		if _, ok := shares[f.ns]; !ok {
			order = append(order, f.ns)
		}
		shares[f.ns] = append(shares[f.ns], f)
	}
	for _, k := range order {
		var recs []*kgo.Record
		var seqs []int64
		lost := 0
		for _, f := range shares[k] {
			seqs = append(seqs, f.ref.seq)
			if r, ok := found[f.ref]; ok {
				recs = append(recs, r)
			} else {
				lost++
			}
		}
		var reason string
		switch {
		case lost > 0:
			// The namespace's records past the lost one must not be applied before it.
			reason = fmt.Sprintf("%d of the namespace's failed records are no longer on the topic at their place; republish them (loomd republish)", lost)
		case len(recs) > 0:
			err := p.apply(ctx, recs, true)
			if err == nil {
				res.Repaired += len(recs)
				p.log.Info("projector: repaired a namespace's failures", "namespace", k.org+"/"+k.namespace, "records", len(recs))
				continue
			}
			if transient(err) || ctx.Err() != nil {
				return res, err
			}
			reason = err.Error()
		}
		res.Failing += len(seqs)
		p.log.Warn("projector: a namespace's failures failed again", "namespace", k.org+"/"+k.namespace, "records", len(seqs), "reason", reason)
		if err := noteRepairFailed(ctx, p.pool, p.cfg.Name, k, seqs, reason); err != nil {
			return res, err
		}
	}
	return res, nil
}

// readFailed reads the records of failures back from the topic.
func readFailed(ctx context.Context, brokers []string, fs []failure) (map[recordRef]*kgo.Record, error) {
	want := map[string]map[int32][]int64{}
	for _, f := range fs {
		if want[f.ref.topic] == nil {
			want[f.ref.topic] = map[int32][]int64{}
		}
		want[f.ref.topic][f.ref.partition] = append(want[f.ref.topic][f.ref.partition], f.ref.offset)
	}
	out := map[recordRef]*kgo.Record{}
	for topic, offsets := range want {
		got, err := kafka.ReadAt(ctx, brokers, topic, offsets)
		if err != nil {
			return nil, fmt.Errorf("read the failed records back from %s: %w", topic, err)
		}
		for _, f := range fs {
			if r := got[f.ref.partition][f.ref.offset]; f.ref.topic == topic && r != nil {
				out[f.ref] = r
			}
		}
	}
	return out, nil
}

// RunRepair runs a repair pass every RepairInterval (LOOM_PROJECTOR_REPAIR_INTERVAL_MS)
// until ctx ends; a zero interval runs none.
func (p *Projector) RunRepair(ctx context.Context, brokers []string) {
	every := p.cfg.RepairInterval
	if every <= 0 {
		return
	}
	periodic.Every(ctx, every, func() {
		pctx, cancel := context.WithTimeout(ctx, max(every, time.Minute))
		res, err := p.Repair(pctx, brokers)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			p.log.Warn("projector: repair pass stopped", "err", err, "repaired", res.Repaired)
		case res.Repaired > 0 || res.Failing > 0:
			p.log.Info("projector: repair pass", "repaired", res.Repaired, "failing", res.Failing)
		}
	})
}
