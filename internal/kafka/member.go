package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// leaveTimeout bounds the leave at a member's end: run's context is over by then.
const leaveTimeout = 5 * time.Second

// RunMember joins a consumer group as a fresh member (opts name the group), hands the
// client to run, and when run returns leaves the group at once, so the partitions move
// to the other members now (a restarted member need not wait out the session) and a
// reset finds the group empty.
func RunMember(brokers []string, opts []kgo.Opt, run func(*kgo.Client) error) error {
	consumer, err := NewClient(brokers, opts...)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
		consumer.LeaveGroupContext(ctx)
		cancel()
		consumer.Close()
	}()
	return run(consumer)
}
