// Command consumer follows Loom's change topic as a webhook replacement: it reads
// loom.memory.revisions.v1 in a consumer group, handles each event once per
// namespace seq (printing one line), and commits offsets only after the events are
// handled. With --api and LOOM_TOKEN it also fetches each memory's content through
// the REST API, the way an authorised consumer reads what the topic seals.
//
//	go run ./examples/consumer --brokers 127.0.0.1:9092 --group my-service
//
// It uses only the public events package and franz-go, as a downstream team would.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/loomplane/loom/events"
)

func main() {
	var cfg config
	var brokers string
	flag.StringVar(&brokers, "brokers", envOr("LOOM_KAFKA_BROKERS", "127.0.0.1:9092"), "Kafka seed brokers, comma separated")
	flag.StringVar(&cfg.Topic, "topic", envOr("LOOM_TOPIC", events.DefaultTopic), "the revisions topic")
	flag.StringVar(&cfg.Group, "group", "loom-example-consumer", "the consumer group; offsets are committed under it")
	flag.StringVar(&cfg.StateFile, "state", "", "file keeping the last handled seq per namespace (dedupe across restarts)")
	flag.StringVar(&cfg.API, "api", "", "Loom's base URL; with LOOM_TOKEN, fetch each memory's content")
	flag.Parse()
	cfg.Brokers = strings.Split(brokers, ",")
	cfg.Token = os.Getenv("LOOM_TOKEN")
	cfg.FetchTimeout = 10 * time.Second

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
