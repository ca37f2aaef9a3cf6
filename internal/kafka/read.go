package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadTopic hands fn every record of topic from each partition's start to its end
// offset at the time of the call, in offset order per partition, without a consumer
// group (nothing is committed), and returns how many records it read. It is a bare
// read of the log: what a consumer costs before it does anything with the records.
func ReadTopic(ctx context.Context, brokers []string, topic string, fn func(*kgo.Record)) (int64, error) {
	starts, ends, err := spanOf(ctx, brokers, topic)
	if err != nil {
		return 0, err
	}
	return ReadRanges(ctx, brokers, topic, starts, ends, func(r *kgo.Record) bool { fn(r); return true })
}

// ReadAt reads the records at the given offsets of topic's partitions, without a
// consumer group: each partition from the lowest offset wanted to the highest, or to
// its end when the log ends before. It returns the records it found, by partition and
// offset; an offset the log no longer (or never) held is missing from the answer.
func ReadAt(ctx context.Context, brokers []string, topic string, want map[int32][]int64) (map[int32]map[int64]*kgo.Record, error) {
	starts, ends, err := spanOf(ctx, brokers, topic)
	if err != nil {
		return nil, err
	}
	wanted := map[int32]map[int64]bool{}
	from, until := map[int32]int64{}, map[int32]int64{}
	for p, offsets := range want {
		wanted[p] = map[int64]bool{}
		for _, o := range offsets {
			wanted[p][o] = true
			if f, ok := from[p]; !ok || o < f {
				from[p] = o
			}
			until[p] = max(until[p], o+1)
		}
		from[p], until[p] = max(from[p], starts[p]), min(until[p], ends[p])
	}
	out := map[int32]map[int64]*kgo.Record{}
	_, err = ReadRanges(ctx, brokers, topic, from, until, func(r *kgo.Record) bool {
		if wanted[r.Partition][r.Offset] {
			if out[r.Partition] == nil {
				out[r.Partition] = map[int64]*kgo.Record{}
			}
			out[r.Partition][r.Offset] = r
		}
		return true
	})
	return out, err
}

// ReadRanges hands fn the records of topic in [from, until) of each partition, in
// offset order per partition, without a consumer group, until fn returns false for a
// record (it needs no more of that partition). It returns how many it handed.
func ReadRanges(ctx context.Context, brokers []string, topic string, from, until map[int32]int64, fn func(*kgo.Record) bool) (int64, error) {
	start := map[int32]kgo.Offset{}
	left := map[int32]int64{}
	for p, end := range until {
		if end > from[p] {
			start[p] = kgo.NewOffset().At(from[p])
			left[p] = end
		}
	}
	if len(left) == 0 {
		return 0, nil
	}
	cl, err := NewClient(brokers, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var n int64
	for len(left) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("read %s (%d records so far): %w", topic, n, err)
		}
		var fetchErr error
		fetches.EachError(func(_ string, _ int32, err error) { fetchErr = err })
		if fetchErr != nil {
			return n, fmt.Errorf("read %s: %w", topic, fetchErr)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			n++
			if !fn(r) || r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return n, nil
}

// Span lists each partition's start and end offsets of topic: the records it holds
// now are [start, end).
func Span(ctx context.Context, adm *kadm.Client, topic string) (starts, ends map[int32]int64, err error) {
	listed := [2]kadm.ListedOffsets{}
	for i, list := range []func(context.Context, ...string) (kadm.ListedOffsets, error){adm.ListStartOffsets, adm.ListEndOffsets} {
		listed[i], err = list(ctx, topic)
		if err == nil {
			err = listed[i].Error()
		}
		if err != nil {
			return nil, nil, fmt.Errorf("list the offsets of %s: %w", topic, err)
		}
	}
	starts, ends = map[int32]int64{}, map[int32]int64{}
	listed[0].Each(func(o kadm.ListedOffset) { starts[o.Partition] = o.Offset })
	listed[1].Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return starts, ends, nil
}

// Tail reads the last n records of each of topic's partitions, without a consumer
// group, in offset order per partition.
func Tail(ctx context.Context, brokers []string, topic string, n int64) ([]*kgo.Record, error) {
	starts, ends, err := spanOf(ctx, brokers, topic)
	if err != nil {
		return nil, err
	}
	from := map[int32]int64{}
	for p, end := range ends {
		from[p] = max(starts[p], end-n)
	}
	var out []*kgo.Record
	_, err = ReadRanges(ctx, brokers, topic, from, ends, func(r *kgo.Record) bool { out = append(out, r); return true })
	return out, err
}

// spanOf is Span through a client of its own.
func spanOf(ctx context.Context, brokers []string, topic string) (starts, ends map[int32]int64, err error) {
	admin, err := NewClient(brokers)
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close()
	return Span(ctx, kadm.NewClient(admin), topic)
}
