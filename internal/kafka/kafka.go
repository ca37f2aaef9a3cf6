// Package kafka is Loom's Kafka plumbing: client options every role shares, the
// creation of the revisions topic, a consumer group member's life (RunMember) and the
// bare reads of a topic.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// NewClient returns a client for brokers with the given role options added.
func NewClient(brokers []string, opts ...kgo.Opt) (*kgo.Client, error) {
	if len(brokers) == 0 {
		return nil, errors.New("no Kafka brokers (LOOM_KAFKA_BROKERS)")
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("loomd")}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client for %v: %w", brokers, err)
	}
	return cl, nil
}

// DefaultMaxRecordBytes is the largest record Loom produces unless configured
// (LOOM_TOPIC_MAX_RECORD_BYTES). A knowledge document's record carries its chunks and
// their vectors, about 3.6 bytes of record per byte of text: a document at the 10 MiB
// limit makes a record of about 36 MiB. MinMaxRecordBytes is Kafka's own default.
const (
	DefaultMaxRecordBytes = 64 << 20
	MinMaxRecordBytes     = 1048588
)

// BatchOverheadBytes is what a record batch adds to its records (headers, framing),
// with room to spare: a producer's batch limit is the record limit plus this.
const BatchOverheadBytes = 64 << 10

// EnsureTopic creates the revisions topic when it does not exist. The topic is the
// replay source of every projection, so it is kept indefinitely.
func EnsureTopic(ctx context.Context, brokers []string, topic string, partitions int32, replication int16, maxRecordBytes int) error {
	return EnsureTopicRetained(ctx, brokers, topic, partitions, replication, 0, maxRecordBytes)
}

// EnsureTopicRetained creates a topic when it does not exist, its records kept for
// retention (0: indefinitely) and accepted up to maxRecordBytes (0: the brokers'
// default).
func EnsureTopicRetained(ctx context.Context, brokers []string, topic string, partitions int32, replication int16, retention time.Duration, maxRecordBytes int) error {
	cl, err := NewClient(brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ms := "-1"
	if retention > 0 {
		ms = strconv.FormatInt(retention.Milliseconds(), 10)
	}
	configs := map[string]*string{
		"retention.ms":    ptr(ms),
		"retention.bytes": ptr("-1"),
		"cleanup.policy":  ptr("delete"),
	}
	if maxRecordBytes > 0 {
		configs["max.message.bytes"] = ptr(strconv.Itoa(maxRecordBytes + BatchOverheadBytes))
	}
	resp, err := adm.CreateTopic(ctx, partitions, replication, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// TopicMaxMessageBytes is the largest record batch topic takes: its max.message.bytes,
// its own or the brokers' default.
func TopicMaxMessageBytes(ctx context.Context, brokers []string, topic string) (int, error) {
	cl, err := NewClient(brokers)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cfgs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	rc, err := cfgs.On(topic, nil)
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	if rc.Err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, rc.Err)
	}
	for _, kv := range rc.Configs {
		if kv.Key == "max.message.bytes" && kv.Source != kmsg.ConfigSourceDefaultConfig {
			return atoiConfig(topic, kv)
		}
	}
	// A topic that sets none takes the brokers' message.max.bytes (a broker describes
	// a topic's value as the built-in default then, whatever the brokers set).
	bcfgs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		return 0, fmt.Errorf("describe the brokers of %s: %w", topic, err)
	}
	for _, b := range bcfgs {
		for _, kv := range b.Configs {
			if kv.Key == "message.max.bytes" {
				return atoiConfig(topic, kv)
			}
		}
	}
	return 0, fmt.Errorf("neither topic %s nor its brokers name a record limit", topic)
}

func atoiConfig(topic string, kv kadm.Config) (int, error) {
	n, err := strconv.Atoi(kv.MaybeValue())
	if err != nil {
		return 0, fmt.Errorf("topic %s: %s %q: %w", topic, kv.Key, kv.MaybeValue(), err)
	}
	return n, nil
}

func ptr(s string) *string { return &s }
