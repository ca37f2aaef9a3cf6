package projector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/watermarks"
)

// ResetTarget is where a reset moves a consumer group: the oldest record, past the
// newest, or the first record produced at or after a time.
type ResetTarget struct {
	spec string    // "earliest", "latest" or the time as given
	at   time.Time // for a time target
}

// ParseResetTarget reads "earliest", "latest" or an RFC 3339 time.
func ParseResetTarget(s string) (ResetTarget, error) {
	switch s {
	case "earliest", "latest":
		return ResetTarget{spec: s}, nil
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return ResetTarget{}, fmt.Errorf("reset target %q: want earliest, latest or an RFC 3339 time", s)
	}
	return ResetTarget{spec: s, at: at}, nil
}

func (t ResetTarget) String() string { return t.spec }

// Committed reports whether the plan's group has committed an offset of any partition.
func (p *ResetPlan) Committed() bool {
	for _, m := range p.Partitions {
		if m.Current >= 0 {
			return true
		}
	}
	return false
}

// PartitionMove is one partition of a reset plan. Current is -1 when the group has
// committed nothing for the partition (its consumer would start at the oldest record).
// Target is set when the move stops short of the target's offset, at the first record
// the projection has not applied (HoldUnapplied).
type PartitionMove struct {
	Partition int32 `json:"partition"`
	Current   int64 `json:"current"`
	New       int64 `json:"new"`
	Target    int64 `json:"target,omitempty"`
}

// ResetPlan is what a reset would do, partition by partition, and who is in the way.
type ResetPlan struct {
	Group      string          `json:"group"`
	Topic      string          `json:"topic"`
	To         string          `json:"to"`
	Partitions []PartitionMove `json:"partitions"`
	Members    []string        `json:"members"` // live members; a reset waits for none
}

// ErrGroupActive is returned by ExecuteReset while the group has live members: Kafka
// refuses an admin offset commit to such a group, and a live member would overwrite it.
var ErrGroupActive = errors.New("the consumer group has live members")

// PlanReset reads the group's committed offsets and the topic's offsets at the
// target, changing nothing.
func PlanReset(ctx context.Context, adm *kadm.Client, group, topic string, to ResetTarget) (*ResetPlan, error) {
	plan := &ResetPlan{Group: group, Topic: topic, To: to.String(), Members: []string{}}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("describe group %s: %w", group, err)
	}
	if g, ok := described[group]; ok {
		if g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
			return nil, fmt.Errorf("describe group %s: %w", group, g.Err)
		}
		for _, m := range g.Members {
			plan.Members = append(plan.Members, m.ClientID+"@"+m.ClientHost)
		}
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		committed, err = kadm.OffsetResponses{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetch the offsets of group %s: %w", group, err)
	}
	var targets kadm.ListedOffsets
	switch {
	case to.spec == "earliest":
		targets, err = adm.ListStartOffsets(ctx, topic)
	case to.spec == "latest":
		targets, err = adm.ListEndOffsets(ctx, topic)
	default:
		// The first record at or after the time; the end offset when there is none.
		targets, err = adm.ListOffsetsAfterMilli(ctx, to.at.UnixMilli(), topic)
	}
	if err != nil {
		return nil, fmt.Errorf("list the offsets of %s at %s: %w", topic, to, err)
	}
	if err := targets.Error(); err != nil {
		return nil, fmt.Errorf("list the offsets of %s at %s: %w", topic, to, err)
	}
	targets.Each(func(o kadm.ListedOffset) {
		move := PartitionMove{Partition: o.Partition, Current: -1, New: o.Offset}
		if c, ok := committed.Lookup(topic, o.Partition); ok && c.Err == nil {
			move.Current = c.At
		}
		plan.Partitions = append(plan.Partitions, move)
	})
	if len(plan.Partitions) == 0 {
		return nil, fmt.Errorf("topic %s has no partitions (does it exist?)", topic)
	}
	sort.Slice(plan.Partitions, func(i, j int) bool { return plan.Partitions[i].Partition < plan.Partitions[j].Partition })
	return plan, nil
}

// HoldUnapplied keeps a plan's forward moves from skipping records projection has not
// applied. A reset moves where the projection's consumers read, never what it holds: a
// skipped record above its namespace's watermark would leave that namespace behind for
// good (a watermark never passes a gap, so its searches would answer PROJECTION_BEHIND
// until the record was republished). So each forward move stops at the partition's
// first such record; everything before it is applied already, and what is read again
// from it on collapses in the tables. It reads the skipped span of each partition and
// judges it by marks, the projection's watermarks (watermarks.ReadProjection).
func HoldUnapplied(ctx context.Context, adm *kadm.Client, brokers []string, marks map[watermarks.Key]int64, plan *ResetPlan) error {
	starts, _, err := kafka.Span(ctx, adm, plan.Topic)
	if err != nil {
		return err
	}
	from, until := map[int32]int64{}, map[int32]int64{}
	moves := map[int32]*PartitionMove{}
	for i := range plan.Partitions {
		m := &plan.Partitions[i]
		if at := max(m.Current, starts[m.Partition]); m.New > at {
			from[m.Partition], until[m.Partition], moves[m.Partition] = at, m.New, m
		}
	}
	if len(moves) == 0 {
		return nil
	}
	_, err = kafka.ReadRanges(ctx, brokers, plan.Topic, from, until, func(r *kgo.Record) bool {
		org, ns, seq, ok := recordSeq(r)
		if !ok || seq <= marks[watermarks.Key{Org: org, Namespace: ns}] {
			return true // applied, or never applicable: no projection can take it
		}
		m := moves[r.Partition]
		m.Target, m.New = m.New, r.Offset
		return false
	})
	if err != nil {
		return fmt.Errorf("read the records the reset would skip: %w", err)
	}
	return nil
}

// recordSeq is the namespace and seq a record of the topic carries in its ce_id.
func recordSeq(r *kgo.Record) (org, namespace string, seq int64, ok bool) {
	for _, h := range r.Headers {
		if h.Key == "ce_id" {
			org, namespace, seq, err := events.ParseRecordID(string(h.Value))
			return org, namespace, seq, err == nil
		}
	}
	return "", "", 0, false
}

// ExecuteReset commits the plan's offsets for its group, after checking again that
// the group has no live member.
func ExecuteReset(ctx context.Context, adm *kadm.Client, plan *ResetPlan) error {
	described, err := adm.DescribeGroups(ctx, plan.Group)
	if err != nil {
		return fmt.Errorf("describe group %s: %w", plan.Group, err)
	}
	if g, ok := described[plan.Group]; ok && len(g.Members) > 0 {
		return fmt.Errorf("reset group %s: %w (%d): stop its consumers first", plan.Group, ErrGroupActive, len(g.Members))
	}
	offsets := kadm.Offsets{}
	for _, m := range plan.Partitions {
		offsets.Add(kadm.Offset{Topic: plan.Topic, Partition: m.Partition, At: m.New, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctx, plan.Group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("commit the reset offsets of group %s: %w", plan.Group, err)
	}
	return nil
}

// Write prints the plan as a table, as kafka-consumer-groups --reset-offsets does.
func (p *ResetPlan) Write(w io.Writer) error {
	fmt.Fprintf(w, "group %s, topic %s, reset to %s\n", p.Group, p.Topic, p.To)
	if len(p.Members) > 0 {
		fmt.Fprintf(w, "live members: %s\n", strings.Join(p.Members, ", "))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tCURRENT\tNEW\t")
	for _, m := range p.Partitions {
		current := "-"
		if m.Current >= 0 {
			current = fmt.Sprint(m.Current)
		}
		held := ""
		if m.Target > 0 {
			held = fmt.Sprintf("held short of %d: the projection has not applied the record at %d", m.Target, m.New)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", m.Partition, current, m.New, held)
	}
	return tw.Flush()
}
