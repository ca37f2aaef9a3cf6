package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestReadTopicReadsEachPartitionToItsEndOnce(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "loom.read.v1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	brokers := c.ListenAddrs()
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
