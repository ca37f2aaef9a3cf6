package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/outbox"
)

// park publishes a loom.parked placeholder in a refused row's place, then marks the
// row parked. The placeholder goes first: until Kafka has it the row stays pending,
// so a crash in between publishes the placeholder again (consumers dedupe by seq)
// rather than leaving the seq missing.
func (r *Relay) park(ctx context.Context, row outboxRow, attempts int, cause error) error {
	// A record that takes no seq (an extraction request: seq 0) leaves no gap to fill.
	if row.Seq > 0 {
		rec, err := placeholder(row, r.pipe.EventSource)
		if err != nil {
			return err
		}
		if err := r.producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
			return fmt.Errorf("publish the loom.parked placeholder of %s seq %d: %w", row.ns(), row.Seq, err)
		}
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := outbox.Park(uctx, r.pool, row.ID, attempts, cause.Error()); err != nil {
		return err
	}
	r.parked.Inc()
	r.log.Error("relay: parked a record Kafka keeps refusing; a loom.parked placeholder took its seq",
		"namespace", row.ns(), "seq", row.Seq, "outbox_id", row.ID, "attempts", attempts, "err", cause)
	return nil
}

// placeholder is the loom.parked record of a row: the row's id, key and commit time,
// no revision and no content.
func placeholder(row outboxRow, defaultSource string) (*kgo.Record, error) {
	committed := row.CreatedAt
	if env, err := events.Decode(row.Value); err == nil {
		committed = env.CommittedAt
	}
	source := defaultSource
	var pairs [][2]string
	if json.Unmarshal(row.Headers, &pairs) == nil {
		for _, p := range pairs {
			if p[0] == "ce_source" && p[1] != "" {
				source = p[1]
			}
		}
	}
	env := &events.Envelope{
		Version: events.EnvelopeVersion, ID: events.RecordID(row.Org, row.Namespace, row.Seq), Type: events.TypeParked,
		Org: row.Org, Namespace: row.Namespace, Seq: row.Seq, CommittedAt: committed,
	}
	value, err := events.Encode(env)
	if err != nil {
		return nil, fmt.Errorf("encode the loom.parked placeholder of %s seq %d: %w", row.ns(), row.Seq, err)
	}
	rec := &kgo.Record{Topic: row.Topic, Key: row.Key, Value: value}
	for _, h := range events.CloudEventHeaders(env, source) {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return rec, nil
}
