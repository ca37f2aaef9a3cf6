package projector

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// isolate applies a batch that keeps failing (cause is its last error) namespace by
// namespace, halving the namespaces until each failing share is one namespace's, so a
// batch of many namespaces with one bad one costs a few inserts, not one per
// namespace. The shares that apply are applied; each failing namespace's records past
// its watermark are recorded as failures with the error, which holds its watermark. A
// transient error stops it: the whole batch is retried.
func (p *Projector) isolate(ctx context.Context, recs []*kgo.Record, cause error) error {
	failing, err := p.bisect(ctx, byNamespace(recs), cause)
	if err != nil {
		return err
	}
	var fs []failure
	for _, f := range failing {
		b := decodeBatch(f.recs, p.undecoded, p.log)
		marks, err := readWatermarks(ctx, p.pool, p.cfg.Name, b.namespaces(), false)
		if err != nil {
			return err
		}
		for k, refs := range b.refs {
			share := allFailed(k, refs, marks[k], f.err.Error())
			if len(share) == 0 {
				p.log.Warn("projector: records at or below their namespace's watermark (a replay) cannot be applied again; the tables keep what they hold",
					"namespace", k.org+"/"+k.namespace, "records", len(refs), "err", f.err)
			}
			fs = append(fs, share...)
		}
	}
	if _, _, _, err := advanceWatermarks(ctx, p.pool, p.cfg.Name, settlement{failures: fs}); err != nil {
		return err
	}
	p.noteFailures(fs)
	return nil
}

// failedShare is one namespace's records and the error that refused them.
type failedShare struct {
	recs []*kgo.Record
	err  error
}

// bisect applies groups (each one namespace's records) that together failed with
// cause, half by half, and returns the groups that fail alone.
func (p *Projector) bisect(ctx context.Context, groups [][]*kgo.Record, cause error) ([]failedShare, error) {
	if len(groups) == 1 {
		return []failedShare{{groups[0], cause}}, nil
	}
	var out []failedShare
	half := len(groups) / 2
	for _, part := range [][][]*kgo.Record{groups[:half], groups[half:]} {
		err := p.apply(ctx, flatten(part), false)
		switch {
		case err == nil:
		case transient(err):
			return nil, err
		default:
			f, err := p.bisect(ctx, part, err)
			if err != nil {
				return nil, err
			}
			out = append(out, f...)
		}
	}
	return out, nil
}

// byNamespace groups records by their key (a namespace's records share it), in the
// order the namespaces first appear; each group keeps its records' order.
func byNamespace(recs []*kgo.Record) [][]*kgo.Record {
	index := map[string]int{}
	var groups [][]*kgo.Record
	for _, r := range recs {
		i, ok := index[string(r.Key)]
		if !ok {
			i = len(groups)
			index[string(r.Key)] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	return groups
}

func flatten(groups [][]*kgo.Record) []*kgo.Record {
	var out []*kgo.Record
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}
