package kafka

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A member that stops leaves its group at once: the group is empty the moment
// RunMember returns (a reset may proceed), and run's error is RunMember's.
func TestRunMemberLeavesTheGroupWhenRunReturns(t *testing.T) {
	ctx, brokers := fakeKafka(t, kfake.SeedTopics(2, "loom.member.v1"))
	const group = "loom-member-test"
	admin, err := NewClient(brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "loom.member.v1", Value: []byte("r")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	stopped := errors.New("run stopped")
	err = RunMember(brokers, []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics("loom.member.v1")}, func(c *kgo.Client) error {
		c.PollFetches(ctx) // answers the record once the member has joined and been assigned
		groups, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if g := groups[group]; len(g.Members) != 1 {
			t.Fatalf("while run runs, the group has %d members (state %q), want 1", len(g.Members), g.State)
		}
		return stopped
	})
	if !errors.Is(err, stopped) {
		t.Fatalf("RunMember answered %v, want run's error", err)
	}
	groups, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if g := groups[group]; len(g.Members) != 0 || g.State != "Empty" {
		t.Fatalf("after RunMember, the group has %d members (state %q), want none", len(g.Members), g.State)
	}
}
