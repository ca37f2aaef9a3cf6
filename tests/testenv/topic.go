package testenv

import (
	"context"
	"fmt"
	"slices"
	"sync"
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
// of the call, without a consumer group. A topic's records are read once: a later call
// reads only those appended since, while the topic keeps its ID and its partitions their
// start offsets (a topic deleted and created again, or records deleted, is read anew).
func (e *Env) Records(t testing.TB, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := e.topics.read(ctx, e.Stack.Kafka.Brokers(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// topicReads keeps the records Records has read, by topic.
type topicReads struct {
	mu      sync.Mutex
	byTopic map[string]*topicRead
}

// topicRead is what was read of one topic: its ID, each partition's start offset and
// the offset up to which it was read, and the records, each partition's in offset order.
type topicRead struct {
	id      kadm.TopicID
	starts  map[int32]int64
	until   map[int32]int64
	records []*kgo.Record
}

func (c *topicReads) read(ctx context.Context, brokers []string, topic string) ([]*kgo.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, err := kafka.NewClient(brokers)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", topic, err)
	}
	starts, ends, err := kafka.Span(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	id := details[topic].ID
	prev := c.byTopic[topic]
	if prev == nil || prev.id != id || !sameOffsets(prev.starts, starts) || shrunk(prev.until, ends) {
		prev = &topicRead{id: id, starts: starts, until: starts}
	}
	next := &topicRead{id: id, starts: starts, until: ends, records: prev.records}
	if _, err := kafka.ReadRanges(ctx, brokers, topic, prev.until, ends, func(r *kgo.Record) bool {
		next.records = append(next.records, r)
		return true
	}); err != nil {
		return nil, err
	}
	if c.byTopic == nil {
		c.byTopic = map[string]*topicRead{}
	}
	c.byTopic[topic] = next
	return slices.Clone(next.records), nil
}

// shrunk reports whether a partition ends below the offset it was read up to.
func shrunk(until, ends map[int32]int64) bool {
	for p, o := range until {
		if ends[p] < o {
			return true
		}
	}
	return false
}

func sameOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if bo, ok := b[p]; !ok || bo != o {
			return false
		}
	}
	return true
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

// ResetGroup moves a consumer group of the topic to target (earliest, latest or an
// RFC 3339 time), as `loomd projector reset --group` does, creating it when it never
// committed (kfake describes such a group as not found).
func (e *Env) ResetGroup(t testing.TB, group, target string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := e.Admin(t)
	topic := e.Config(nil).Pipeline.Topic
	var listed kadm.ListedOffsets
	var err error
	switch target {
	case "earliest":
		listed, err = adm.ListStartOffsets(ctx, topic)
	case "latest":
		listed, err = adm.ListEndOffsets(ctx, topic)
	default:
		at, perr := time.Parse(time.RFC3339Nano, target)
		if perr != nil {
			t.Fatal(perr)
		}
		listed, err = adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), topic)
	}
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("list the offsets of %s: %v", topic, err)
	}
	offsets := kadm.Offsets{}
	listed.Each(func(o kadm.ListedOffset) {
		offsets.Add(kadm.Offset{Topic: topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})
	Eventually(t, 30*time.Second, "group "+group+" to take its reset (its members gone)", func() bool {
		resp, err := adm.CommitOffsets(ctx, group, offsets)
		return err == nil && resp.Error() == nil
	})
}
