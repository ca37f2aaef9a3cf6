package devstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/pprof"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/loomplane/loom/internal/kafka"
)

// Kafka is an in-process kfake broker with a data directory, so the topic (Loom's
// replay source) survives a restart of `loomd dev`.
type Kafka struct {
	dir        string
	port       int
	durable    bool
	topics     []string
	partitions int32
	log        io.Writer

	Cluster *kfake.Cluster
	addrs   []string // where the broker listens, kept while it is stopped
}

// Brokers are the seed addresses for clients; they stay the same across Restart.
func (k *Kafka) Brokers() []string { return k.addrs }

// Start opens the broker; topics are created on first start only.
func (k *Kafka) Start(_ context.Context) error {
	if err := os.MkdirAll(k.dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", k.dir, err)
	}
	parts := k.partitions
	if parts < 1 {
		parts = 8
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(k.port),
		kfake.DataDir(k.dir),
		kfake.ClusterID("loom-dev"),
		kfake.DefaultNumPartitions(int(parts)),
		// A topic made without its own max.message.bytes (a test's) takes Loom's
		// default record limit, as the topic loomd creates does.
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(kafka.DefaultMaxRecordBytes + kafka.BatchOverheadBytes)}),
	}
	if k.durable {
		opts = append(opts, kfake.SyncWrites())
	}
	if len(k.topics) > 0 {
		opts = append(opts, kfake.SeedTopics(parts, k.topics...))
	}
	// The broker's goroutines carry a profile label, so a CPU profile of a process
	// that embeds it tells its share from the roles' (`loomd dev`, `loomd bench`).
	var c *kfake.Cluster
	var err error
	pprof.Do(context.Background(), pprof.Labels("role", "kafka broker"), func(context.Context) {
		c, err = kfake.NewCluster(opts...)
	})
	if err != nil {
		if k.port != 0 {
			return fmt.Errorf("start Kafka (kfake) on 127.0.0.1:%d (is another Kafka or loomd dev using the port?): %w", k.port, err)
		}
		return fmt.Errorf("start Kafka (kfake): %w", err)
	}
	k.Cluster = c
	k.addrs = c.ListenAddrs()
	logf(k.log, "Kafka (kfake) listening on %v, data in %s", c.ListenAddrs(), k.dir)
	return nil
}

// Stop closes the broker, saving its state to the data directory. Clients see a
// Kafka that went away: connections refused until Restart.
func (k *Kafka) Stop() {
	if k.Cluster != nil {
		if _, port, err := net.SplitHostPort(k.addrs[0]); err == nil {
			k.port, _ = strconv.Atoi(port) // a restart comes back where clients look
		}
		k.Cluster.Close()
		k.Cluster = nil
	}
}

// Restart starts a stopped broker again on the same port over the same data, as a
// Kafka coming back from an outage.
func (k *Kafka) Restart(ctx context.Context) error {
	if k.Cluster != nil {
		return nil
	}
	return k.Start(ctx)
}
