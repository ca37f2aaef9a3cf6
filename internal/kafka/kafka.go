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

// EnsureTopic creates the revisions topic when it does not exist. The topic is the
// replay source of every projection, so it is kept indefinitely.
func EnsureTopic(ctx context.Context, brokers []string, topic string, partitions int32, replication int16) error {
	return EnsureTopicRetained(ctx, brokers, topic, partitions, replication, 0)
}

// EnsureTopicRetained creates a topic when it does not exist, its records kept for
// retention (0: indefinitely).
func EnsureTopicRetained(ctx context.Context, brokers []string, topic string, partitions int32, replication int16, retention time.Duration) error {
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
	resp, err := adm.CreateTopic(ctx, partitions, replication, map[string]*string{
		"retention.ms":    ptr(ms),
		"retention.bytes": ptr("-1"),
		"cleanup.policy":  ptr("delete"),
	}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

func ptr(s string) *string { return &s }
