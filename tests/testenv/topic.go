package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
)

// TopicRecords reads every record on the topic, from the start to the end offsets at
// the time of the call, without a consumer group.
func (e *Env) TopicRecords(t testing.TB) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := e.base.Topic
	if topic == "" {
		t.Fatal("no topic configured")
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(e.Stack.Kafka.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
	admin.Close()
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Stack.Kafka.Brokers()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	seen := map[int32]int64{}
	for len(want) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading the topic: %v (have %d records)", ctx.Err(), len(out))
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset < end {
				out = append(out, r)
				seen[r.Partition] = r.Offset + 1
				if seen[r.Partition] >= end {
					delete(want, r.Partition)
				}
			}
		})
	}
	return out
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
