package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestReadTopicReadsEachPartitionToItsEndOnce(t *testing.T) {
	ctx, brokers := fakeKafka(t, kfake.SeedTopics(3, "loom.read.v1"))
	if n, err := ReadTopic(ctx, brokers, "loom.read.v1", func(*kgo.Record) {}); err != nil || n != 0 {
		t.Fatalf("empty topic: %d records, %v", n, err)
	}
	producer, err := NewClient(brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	const records = 50
	for i := 0; i < records; i++ {
		r := &kgo.Record{Topic: "loom.read.v1", Key: []byte(fmt.Sprint(i % 5)), Value: []byte(fmt.Sprint(i))}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	next := map[int32]int64{}
	n, err := ReadTopic(ctx, brokers, "loom.read.v1", func(r *kgo.Record) {
		if r.Offset != next[r.Partition] {
			t.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, next[r.Partition]-1)
		}
		next[r.Partition] = r.Offset + 1
	})
	if err != nil || n != records {
		t.Fatalf("read %d records (%v), want %d", n, err, records)
	}
	if len(next) < 2 {
		t.Fatalf("the records landed in %d partitions; the test wants several", len(next))
	}
}

func TestReadAtFindsTheOffsetsAskedFor(t *testing.T) {
	ctx, brokers := fakeKafka(t, kfake.SeedTopics(2, "loom.readat.v1"))
	producer, err := NewClient(brokers, kgo.DefaultProduceTopic("loom.readat.v1"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for i := 0; i < 20; i++ {
		r := &kgo.Record{Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadAt(ctx, brokers, "loom.readat.v1", map[int32][]int64{0: {3, 7}, 1: {0, 9, 40}})
	if err != nil {
		t.Fatal(err)
	}
	// Partition 0 holds 0, 2, 4, ... at offsets 0, 1, 2, ...; partition 1 holds 1, 3, 5, ...
	for _, c := range []struct {
		p      int32
		offset int64
		value  string
	}{{0, 3, "6"}, {0, 7, "14"}, {1, 0, "1"}, {1, 9, "19"}} {
		if r := got[c.p][c.offset]; r == nil || string(r.Value) != c.value {
			t.Errorf("partition %d offset %d: %v, want value %s", c.p, c.offset, r, c.value)
		}
	}
	if len(got[0]) != 2 || len(got[1]) != 2 {
		t.Fatalf("read %d and %d records, want exactly the 2 and 2 that exist: %v", len(got[0]), len(got[1]), got)
	}
}
