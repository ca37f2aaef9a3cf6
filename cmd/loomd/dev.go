package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/devstack"
)

// runDev starts the embedded stack under --dir and serves every role on one process.
func runDev(ctx context.Context, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	dir := fs.String("dir", ".loom", "where the embedded stores keep their data")
	addr := fs.String("addr", cfg.HTTP.Addr, "HTTP listen address")
	kafkaPort := fs.Int("kafka-port", 9092, "loopback port of the embedded Kafka")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := servePprof(cfg.HTTP.PprofAddr); err != nil {
		return err
	}
	paceGC(ctx, cfg.Runtime)
	log := newLogger(cfg.LogLevel, os.Stderr)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s (is another loomd running?): %w", *addr, err)
	}
	fmt.Fprintf(os.Stderr, "loomd dev: starting the embedded stores in %s ...\n", *dir)
	stack, err := devstack.Start(ctx, devstack.Options{
		Dir: *dir, Durable: true, KafkaPort: *kafkaPort,
		Topics: []string{cfg.Pipeline.Topic}, Partitions: cfg.Kafka.TopicPartitions, Log: os.Stderr,
	})
	if err != nil {
		ln.Close()
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "loomd dev: stopping the embedded stores ...")
		if err := stack.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "loomd dev:", err)
		}
	}()
	stack.Configure(&cfg)
	cfg.Roles = config.AllRoles()
	cfg.Boot.Migrate = true
	if cfg.SearchIndex.CheckpointDir == "" {
		cfg.SearchIndex.CheckpointDir = filepath.Join(*dir, "index")
	}
	n, err := app.Open(ctx, cfg, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer n.Close()
	token, err := devToken(ctx, n.Tokens, filepath.Join(*dir, "dev-token"))
	if err != nil {
		ln.Close()
		return err
	}
	envFile := filepath.Join(*dir, "dev.env")
	if err := writeDevEnv(envFile, cfg, stack, token); err != nil {
		ln.Close()
		return err
	}
	printBanner(ln.Addr().String(), token, stack, cfg.Pipeline.Topic, envFile, llmBanner(cfg.LLM))
	err = n.Run(ctx, ln)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// devToken keeps one admin token per data directory, so a second `make dev` prints
// the same token as the first.
func devToken(ctx context.Context, tokens *auth.Store, file string) (string, error) {
	if b, err := os.ReadFile(file); err == nil {
		secret := strings.TrimSpace(string(b))
		if _, err := tokens.Authenticate(ctx, secret); err == nil {
			return secret, nil
		} else if !errors.Is(err, auth.ErrUnauthenticated) {
			return "", err
		}
	}
	secret, _, err := tokens.Create(ctx, auth.NewToken{Org: "dev", Role: auth.RoleAdmin, Name: "loomd dev"})
	if err != nil {
		return "", fmt.Errorf("create the dev token: %w", err)
	}
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keep the dev token: %w", err)
	}
	return secret, nil
}

// writeDevEnv keeps the embedded stores' addresses, their KEK and the dev token, for the
// operator commands (loomd projector, republish, token) and the README's tour run
// against this stack from another shell; the stores' ports on their own, for psql
// and clickhouse-client.
func writeDevEnv(file string, cfg config.Config, stack *devstack.Stack, token string) error {
	var env strings.Builder
	for _, kv := range [][2]string{{"LOOM_PG_DSN", cfg.PG.DSN}, {"LOOM_CH_ADDR", strings.Join(cfg.ClickHouse.Addr, ",")},
		{"LOOM_KAFKA_BROKERS", strings.Join(cfg.Kafka.Brokers, ",")}, {"LOOM_PG_DURABILITY", string(cfg.PG.Durability)}, {"LOOM_KEK", cfg.Keys.KEK}, {"LOOM_TOKEN", token},
		{"LOOM_DEV_PG_PORT", strconv.Itoa(stack.Postgres.Port)}, {"LOOM_DEV_CH_PORT", strconv.Itoa(stack.ClickHouse.TCPPort)}} {
		fmt.Fprintf(&env, "%s='%s'\n", kv[0], strings.ReplaceAll(kv[1], "'", `'\''`))
	}
	if err := os.WriteFile(file, []byte(env.String()), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}

func printBanner(addr, token string, stack *devstack.Stack, topic, envFile, models string) {
	host := addr
	if h, p, err := net.SplitHostPort(addr); err == nil && (h == "" || h == "::" || h == "0.0.0.0") {
		host = "localhost:" + p
	}
	base := "http://" + host
	fmt.Printf(`
Loom is running at %[1]s (org "dev")

  export LOOM_TOKEN=%[2]s

  # write a memory
  curl -s -X PUT %[1]s/v1/namespaces/demo/memories/editor-theme \
    -H "Authorization: Bearer $LOOM_TOKEN" -H 'Content-Type: application/json' \
    -d '{"value": "the user prefers dark mode in the editor"}'

  # read it back, and search for it
  curl -s %[1]s/v1/namespaces/demo/memories/editor-theme -H "Authorization: Bearer $LOOM_TOKEN"
  curl -s -X POST '%[1]s/v1/namespaces/demo/memories:search' \
    -H "Authorization: Bearer $LOOM_TOKEN" -H 'Content-Type: application/json' \
    -d '{"query": "which theme does the user like?"}'

  # the stores
  %[3]s
  %[4]s --database loom
  kcat -b %[5]s -C -t %[6]s -e -f 'key=%%k offset=%%o headers=%%h\n'

  # another shell (the README's tour, ./bin/loomd projector|republish|token): the
  # token, the stores' addresses and ports (LOOM_DEV_PG_PORT, LOOM_DEV_CH_PORT)
  set -a; . %[7]s; set +a

%[8]s

Ctrl-C stops Loom and its stores; data stays in .loom/ for the next run.
`, base, token, stack.Postgres.Psql(), stack.ClickHouse.Client(), strings.Join(stack.Kafka.Brokers(), ","), topic, envFile, models)
}
