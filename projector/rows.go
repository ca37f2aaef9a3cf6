package projector

import (
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/revisions"
)

// nsKey names a namespace within an org.
type nsKey struct{ org, namespace string }

// batch is a poll's records, decoded.
type batch struct {
	revisions []*events.Envelope
	seqs      map[nsKey][]int64 // every seq seen, revision or not, for the watermarks
	// refs are where each seq's record is on the topic, for a failure's record.
	refs map[nsKey][]recordRef
	// fences are the batch's erasures; jumps their seqs, which move a watermark over
	// the seqs the erasure withdrew before they were published.
	fences []erasure.Fence
	jumps  map[nsKey]map[int64]bool
	// redactions are the batch's memory.redacted records: no row of their own but an
	// audit row, and their versions' text scrubbed.
	redactions []*events.Envelope
	// documents are the batch's knowledge document revisions (documents.go).
	documents []*events.Envelope
	// erasures are the batch's memory.erased records that carry their erasure: each
	// leaves an audit row (the erasure.request row of the audit chain), and the
	// erasure.started row when its note says so.
	erasures []*events.Envelope
	// audited are the batch's loom.audited records: an erasure saga's later rows.
	audited []*events.Envelope
}

// namespaces lists the batch's namespaces.
func (b batch) namespaces() []nsKey {
	out := make([]nsKey, 0, len(b.seqs))
	for k := range b.seqs {
		out = append(out, k)
	}
	return out
}

// recordRef is a record's seq and its place on the topic.
type recordRef struct {
	seq       int64
	topic     string
	partition int32
	offset    int64
}

// without returns the batch less every record of the namespaces in drop, and the
// records it left out.
func (b batch) without(drop map[nsKey]bool) (batch, map[nsKey][]recordRef) {
	if len(drop) == 0 {
		return b, nil
	}
	keep := func(env *events.Envelope) bool { return !drop[nsKey{env.Org, env.Namespace}] }
	out := batch{revisions: filter(b.revisions, keep), redactions: filter(b.redactions, keep), documents: filter(b.documents, keep),
		erasures: filter(b.erasures, keep), audited: filter(b.audited, keep),
		seqs: map[nsKey][]int64{}, refs: map[nsKey][]recordRef{}, jumps: map[nsKey]map[int64]bool{}}
	for _, f := range b.fences {
		if !drop[nsKey{f.Org, f.Namespace}] {
			out.fences = append(out.fences, f)
		}
	}
	left := map[nsKey][]recordRef{}
	for k, seqs := range b.seqs {
		if drop[k] {
			left[k] = b.refs[k]
			continue
		}
		out.seqs[k], out.refs[k] = seqs, b.refs[k]
		if j, ok := b.jumps[k]; ok {
			out.jumps[k] = j
		}
	}
	return out, left
}

func filter(envs []*events.Envelope, keep func(*events.Envelope) bool) []*events.Envelope {
	var out []*events.Envelope
	for _, e := range envs {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

func decodeBatch(recs []*kgo.Record, undecoded *metrics.Counter, log *slog.Logger) batch {
	b := batch{seqs: map[nsKey][]int64{}, refs: map[nsKey][]recordRef{}, jumps: map[nsKey]map[int64]bool{}}
	for _, d := range revisions.Decode(recs, func(r *kgo.Record, err error) {
		undecoded.Inc()
		log.Error("projector: skipping a record that is not a valid envelope", "partition", r.Partition, "offset", r.Offset, "err", err)
	}) {
		env := d.Env
		k := nsKey{env.Org, env.Namespace}
		b.seqs[k] = append(b.seqs[k], env.Seq)
		b.refs[k] = append(b.refs[k], recordRef{seq: env.Seq, topic: d.Topic, partition: d.Partition, offset: d.Offset})
		switch d.Kind {
		case revisions.Erasure:
			if d.Fence != nil {
				b.fences = append(b.fences, *d.Fence)
				b.erasures = append(b.erasures, env)
			}
			// Every seq below an erasure's arrived before it or was withdrawn: the
			// relay publishes a namespace's outbox in seq order and the erasure's
			// record is queued after every row it left.
			if b.jumps[k] == nil {
				b.jumps[k] = map[int64]bool{}
			}
			b.jumps[k][env.Seq] = true
		case revisions.Redaction:
			b.redactions = append(b.redactions, env)
		case revisions.Revision:
			b.revisions = append(b.revisions, env)
		default:
			switch {
			case env.Type.IsDocument():
				b.documents = append(b.documents, env)
			case env.Type == events.TypeAudited:
				b.audited = append(b.audited, env)
			}
		}
	}
	return b
}

// opened is a revision with its content opened: one row for each table.
type opened struct {
	env     *events.Envelope
	content *events.Content
}

// unopened is a revision whose content its data key, which exists, does not open: a
// damaged record, not a redaction. It cannot be projected as it is.
type unopened struct {
	env *events.Envelope
	err error
}

// openAll opens each revision's content (revisions.OpenInPlace: a batch is decoded afresh
// for each attempt, so each envelope opens once); the keyless (redacted or
// erased) are counted and returned: they still leave their audit row, scrubbed, so a
// replay chains the audit trail as the first projection did.
func openAll(revs []*events.Envelope, keys map[string][]byte, keyless *metrics.Counter) ([]opened, []unopened, []*events.Envelope) {
	ok, failed, gone := revisions.OpenInPlace(revs, keys)
	keyless.Add(float64(len(gone)))
	out := make([]opened, len(ok))
	for i, o := range ok {
		out[i] = opened{env: o.Env, content: o.Content}
	}
	var bad []unopened
	for _, u := range failed {
		bad = append(bad, unopened{env: u.Env, err: u.Err})
	}
	return out, bad, gone
}

// seconds truncates to the DateTime precision both ClickHouse versions store.
func seconds(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// secondsPtr is seconds for a Nullable(DateTime) column.
func secondsPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	s := seconds(*t)
	return &s
}
