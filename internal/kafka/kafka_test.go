package kafka

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
)

func TestEnsureTopicCreatesOnceAndKeepsRecordsForever(t *testing.T) {
	ctx, brokers := fakeKafka(t)
	for i := 0; i < 2; i++ {
		if err := EnsureTopic(ctx, brokers, "loom.test.v1", 3, -1, DefaultMaxRecordBytes); err != nil {
			t.Fatalf("ensure topic, call %d: %v", i+1, err)
		}
	}
	cl, err := NewClient(brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, "loom.test.v1")
	if err != nil {
		t.Fatal(err)
	}
	if d := details["loom.test.v1"]; d.Err != nil || len(d.Partitions) != 3 {
		t.Fatalf("topic: %+v", d)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, "loom.test.v1")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfgs.On("loom.test.v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range rc.Configs {
		if kv.Key == "retention.ms" && kv.MaybeValue() != "-1" {
			t.Fatalf("retention.ms = %q: the topic is the replay source and must be kept", kv.MaybeValue())
		}
		// A knowledge document's record runs to tens of megabytes: the topic takes it.
		if want := strconv.Itoa(DefaultMaxRecordBytes + BatchOverheadBytes); kv.Key == "max.message.bytes" && kv.MaybeValue() != want {
			t.Fatalf("max.message.bytes = %q, want %s", kv.MaybeValue(), want)
		}
	}
	if _, err := NewClient(nil); err == nil {
		t.Fatal("a client without brokers must be refused")
	}
}

// fakeKafka starts a one-broker kfake cluster for the test and returns a context
// bounding the test's Kafka calls and the brokers' addresses.
func fakeKafka(t *testing.T, opts ...kfake.Opt) (context.Context, []string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx, c.ListenAddrs()
}

// The record limit of a topic reads its own max.message.bytes, or the brokers' default
// on a topic that sets none.
func TestTopicMaxMessageBytesReadsTheTopicsLimit(t *testing.T) {
	ctx, brokers := fakeKafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "2000000"}))
	if err := EnsureTopic(ctx, brokers, "loom.own.v1", 1, -1, 4<<20); err != nil {
		t.Fatal(err)
	}
	if err := EnsureTopic(ctx, brokers, "loom.default.v1", 1, -1, 0); err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int{"loom.own.v1": 4<<20 + BatchOverheadBytes, "loom.default.v1": 2000000} {
		if got, err := TopicMaxMessageBytes(ctx, brokers, topic); err != nil || got != want {
			t.Errorf("%s takes %d (%v), want %d", topic, got, err, want)
		}
	}
}
