package app

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/kafka"
)

// topicTailed is how many of the change topic's latest records health's topic lists.
const topicTailed = 20

// tailRecord is one record of the change topic as the operator reads it: where it
// sits and its envelope's routing fields, never its content (sealed in the record, and
// not opened here) nor a revision's plain fields (its key and identity).
type tailRecord struct {
	Partition       int32     `json:"partition"`
	Offset          int64     `json:"offset"`
	Timestamp       time.Time `json:"timestamp"`
	Bytes           int       `json:"bytes"`
	EnvelopeVersion int       `json:"envelope_version,omitempty"`
	ID              string    `json:"id,omitempty"`
	Type            string    `json:"type,omitempty"`
	Org             string    `json:"org,omitempty"`
	Namespace       string    `json:"namespace,omitempty"`
	Seq             int64     `json:"seq,omitempty"`
	CommittedAt     time.Time `json:"committed_at,omitzero"`
	Sealed          bool      `json:"sealed"`
	Undecodable     bool      `json:"undecodable,omitempty"`
}

// topicTail reads the change topic's latest records, newest first.
func (p *Process) topicTail(ctx context.Context) ([]tailRecord, error) {
	recs, err := kafka.Tail(ctx, p.Cfg.Kafka.Brokers, p.Cfg.Pipeline.Topic, topicTailed)
	if err != nil {
		return nil, err
	}
	out := make([]tailRecord, 0, len(recs))
	for _, r := range recs {
		t := tailRecord{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(), Bytes: len(r.Value)}
		if env, err := events.Decode(r.Value); err != nil {
			t.Undecodable = true
		} else {
			t.EnvelopeVersion, t.ID, t.Type, t.Org, t.Namespace, t.Seq = env.Version, env.ID, string(env.Type), env.Org, env.Namespace, env.Seq
			t.CommittedAt, t.Sealed = env.CommittedAt, env.Sealed != nil
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b tailRecord) int {
		return cmp.Or(b.Timestamp.Compare(a.Timestamp), cmp.Compare(a.Partition, b.Partition), cmp.Compare(b.Offset, a.Offset))
	})
	return out[:min(len(out), topicTailed)], nil
}
