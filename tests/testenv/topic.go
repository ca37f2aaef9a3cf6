package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/kafka"
)

// TopicRecords reads every record on the revisions topic, from the start to the end
// offsets at the time of the call, without a consumer group.
func (e *Env) TopicRecords(t testing.TB) []*kgo.Record {
	t.Helper()
	return e.Records(t, e.base.Pipeline.Topic)
}

// Records reads every record on topic, from the start to the end offsets at the time
// of the call, without a consumer group.
func (e *Env) Records(t testing.TB, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	if _, err := kafka.ReadTopic(ctx, e.Stack.Kafka.Brokers(), topic, func(r *kgo.Record) { out = append(out, r) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// CreateTopic creates a topic of 4 partitions with the given topic configs and
// returns its name, unique to the test.
func (e *Env) CreateTopic(t testing.TB, configs map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := Unique(t, "loom.test")
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := e.Admin(t).CreateTopic(ctx, 4, -1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	return topic
}

// Stream checks what a consumer of one namespace sees in records: every record valid
// under the published schema, seqs 1..gen, each first seen in order (a later copy is a
// redelivery), none missing. It returns the first copy of each seq, in seq order.
func Stream(t testing.TB, records []*kgo.Record, org, ns string, gen int64) []*events.Envelope {
	t.Helper()
	schema := EnvelopeSchema(t)
	key := string(events.RecordKey(org, ns))
	var out []*events.Envelope
	for _, r := range records {
		if string(r.Key) != key {
			continue
		}
		CheckSchema(t, schema, fmt.Sprintf("record at %d/%d", r.Partition, r.Offset), r.Value)
		e, err := events.Decode(r.Value)
		if err != nil {
			t.Fatalf("record at %d/%d is not an envelope: %v", r.Partition, r.Offset, err)
		}
		last := int64(len(out))
		switch {
		case e.Seq <= last:
			continue // a redelivery
		case e.Seq != last+1:
			t.Fatalf("%s: seq %d first seen after seq %d", key, e.Seq, last)
		}
		out = append(out, e)
	}
	if int64(len(out)) != gen {
		t.Fatalf("%s: the topic holds seqs 1..%d, want 1..%d", key, len(out), gen)
	}
	return out
}

// GroupCaughtUp reports whether group has committed, on every partition of topic that
// holds records, the end offset: it has consumed everything produced so far.
func (e *Env) GroupCaughtUp(t testing.TB, group, topic string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := e.Admin(t)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	caught := true
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(topic, o.Partition)
		if o.Offset > 0 && (!ok || c.At < o.Offset) {
			caught = false
		}
	})
	return caught
}

// Admin returns a Kafka admin client on the test broker, closed when the test ends.
func (e *Env) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Stack.Kafka.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// SeqRecord is a record of the topic with the seq its envelope carries.
type SeqRecord struct {
	Seq int64
	*kgo.Record
}

// NamespaceRecords reads the topic (as TopicRecords) and keeps a namespace's records,
// each decoded for its seq.
func (e *Env) NamespaceRecords(t testing.TB, org, ns string) []SeqRecord {
	t.Helper()
	var out []SeqRecord
	for _, r := range e.TopicRecords(t) {
		if string(r.Key) != string(events.RecordKey(org, ns)) {
			continue
		}
		env, err := events.Decode(r.Value)
		if err != nil {
			t.Fatalf("record on the topic is not an envelope: %v", err)
		}
		out = append(out, SeqRecord{Seq: env.Seq, Record: r})
	}
	return out
}

// SeqCopies counts how many times each seq of a namespace is on the topic.
func (e *Env) SeqCopies(t testing.TB, org, ns string) map[int64]int {
	t.Helper()
	copies := map[int64]int{}
	for _, r := range e.NamespaceRecords(t, org, ns) {
		copies[r.Seq]++
	}
	return copies
}
