package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/cmd/loomd/bench"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/tracing"
)

// benchOrg is the org the benchmark writes in: its namespaces carry the run's id, so
// runs against configured stores never meet each other's rows.
const benchOrg = "bench"

// runBench runs the benchmark scenarios against the embedded stores (started as
// `loomd dev` starts them, in a temporary directory unless --dir says otherwise) or,
// when LOOM_PG_DSN, LOOM_CH_ADDR and LOOM_KAFKA_BROKERS are all set, against those,
// with every role served by this process. The markdown report goes to stdout, the
// JSON one to --out, progress to stderr.
func runBench(ctx context.Context, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	f, err := parseBenchFlags(args)
	if err != nil {
		return err
	}
	if err := servePprof(cfg.HTTP.PprofAddr); err != nil {
		return err
	}
	paceGC(ctx, cfg.Runtime)
	stopStores, chPID, err := benchStores(ctx, &cfg, f.dir)
	if err != nil {
		return err
	}
	defer stopStores()
	cfg.Roles = config.AllRoles()
	if slices.Contains(f.opts.Scenarios, "extract") && !cfg.LLM.Configured() {
		provider := bench.StartScriptedProvider()
		defer func() {
			if err := provider.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "loomd bench:", err)
			}
		}()
		cfg.LLM.BaseURL, cfg.LLM.Model = provider.URL, bench.ScriptedModel
	}
	// The process's own info lines would bury the progress; LOOM_LOG_LEVEL still wins.
	if os.Getenv("LOOM_LOG_LEVEL") == "" {
		cfg.LogLevel = "warn"
	}
	target, stop, err := benchTarget(ctx, cfg)
	if err != nil {
		return err
	}
	defer stop()
	target.ClickHousePID = chPID
	report, runErr := bench.Run(ctx, target, f.opts)
	if report != nil {
		if err := report.WriteMarkdown(os.Stdout); err != nil {
			return fmt.Errorf("bench: write the report: %w", err)
		}
		if f.out != "" {
			if err := writeReportJSON(f.out, report); err != nil {
				return err
			}
		}
	}
	return runErr
}

// benchFlags are `loomd bench`'s flags, read.
type benchFlags struct {
	opts bench.Options
	out  string // --out: the JSON report's path
	dir  string // --dir: the embedded stores' data
}

func parseBenchFlags(args []string) (benchFlags, error) {
	def := bench.DefaultOptions()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	scenarios := fs.String("scenario", "all", "scenarios to run, comma separated: "+strings.Join(bench.Scenarios, ", ")+", or all")
	duration := fs.Duration("duration", def.Duration, "how long each measured run (one case, Loom or its baseline) lasts")
	concurrency := fs.String("concurrency", "", "concurrency levels, comma separated (default: each scenario's own: set 1,8,32; chain 1,8; get, history and search 5; lag and promote 1; parts 8)")
	out := fs.String("out", "", "also write the report as JSON to this file")
	searchSizes := fs.String("search-sizes", joinInts(def.SearchSizes), "memories per namespace the search scenario searches, comma separated")
	searchIndexOnly := fs.Bool("search-index-only", false, "the search scenario measures the index path alone, not the LOOM_SEARCH_INDEX=clickhouse process")
	packTurns := fs.Int("pack-turns", def.PackTurns, "conversation turns the pack scenario keeps beside its memories (memory.observe, sessions of 100)")
	getRows := fs.Int("get-rows", def.GetRows, "memories the get and history scenarios read among")
	bulkEntries := fs.Int("bulk-entries", def.BulkEntries, "entries of one memory.bulk_set in the bulk scenario (at most 1000)")
	replayRevisions := fs.Int("replay-revisions", def.ReplayRevisions, "the fewest revisions the replay scenario replays (it writes the shortfall first)")
	peerSizes := fs.String("peer-sizes", joinInts(def.PeerSizes), "memories at which the peers scenario searches Loom, mem0 and chromem-go, comma separated (it adds up to the largest)")
	peersLoomOnly := fs.Bool("peers-loom-only", false, "the peers scenario runs Loom alone, without mem0 and chromem-go (its rows then have no baseline)")
	knowledgeDocs := fs.Int("knowledge-docs", def.KnowledgeDocs, "documents the knowledge scenario ingests and searches (about 3.6 chunks each: 28000 for 100k chunks)")
	passes := fs.String("passes", "", "the passes scenario's single-pass cases, comma separated (default: every pass; the case with all of them at once always runs)")
	conversations := fs.String("conversations", def.Conversations, "the conversation corpus the conversations scenario loads and asks")
	statements := fs.Bool("statements", false, "the set and search scenarios also write, on stderr, the statements each case sent Postgres per write or search (index path), by text (every role's)")
	setKeyed := fs.Bool("set-keyed", false, "the set scenario also measures, in one namespace at each concurrency, memory.set sent with a fresh Idempotency-Key per call")
	dir := fs.String("dir", "", "where the embedded stores keep their data (default: a temporary directory, removed afterwards)")
	if err := parseFlags(fs, args); err != nil {
		return benchFlags{}, err
	}
	opts := bench.Options{Duration: *duration, PackTurns: *packTurns, GetRows: *getRows, BulkEntries: *bulkEntries, ReplayRevisions: *replayRevisions,
		KnowledgeDocs: *knowledgeDocs, Conversations: *conversations, SearchIndexOnly: *searchIndexOnly, PeersLoomOnly: *peersLoomOnly, Progress: os.Stderr, Statements: *statements, SetKeyed: *setKeyed}
	var err error
	if opts.Scenarios, err = bench.ParseScenarios(*scenarios); err != nil {
		return benchFlags{}, usageError{fmt.Errorf("bench --scenario: %w", err)}
	}
	if opts.Concurrency, err = parseInts(*concurrency); err != nil {
		return benchFlags{}, usageError{fmt.Errorf("bench --concurrency: %w", err)}
	}
	if opts.PeerSizes, err = parseInts(*peerSizes); err != nil {
		return benchFlags{}, usageError{fmt.Errorf("bench --peer-sizes: %w", err)}
	}
	if *passes != "" {
		opts.Passes = strings.Split(*passes, ",")
	}
	if opts.SearchSizes, err = parseInts(*searchSizes); err != nil {
		return benchFlags{}, usageError{fmt.Errorf("bench --search-sizes: %w", err)}
	}
	if *duration <= 0 || *packTurns < 1 || *getRows < 1 || *bulkEntries < 1 || *bulkEntries > 1000 || *replayRevisions < 1 || *knowledgeDocs < 1 {
		return benchFlags{}, usageError{errors.New("bench: --duration, --pack-turns, --get-rows, --bulk-entries (at most 1000), --replay-revisions and --knowledge-docs must be positive")}
	}
	return benchFlags{opts: opts, out: *out, dir: *dir}, nil
}

// benchStores points cfg at the stores the bench runs on: the configured ones when any
// is set (then all three must be), else embedded ones started in dir, which the
// returned function stops; chPID is then the ClickHouse server's process.
func benchStores(ctx context.Context, cfg *config.Config, dir string) (stop func(), chPID int, err error) {
	configured := cfg.PG.DSN != "" || len(cfg.ClickHouse.Addr) > 0 || len(cfg.Kafka.Brokers) > 0
	if configured {
		if err := cfg.RequireStores(); err != nil {
			return nil, 0, fmt.Errorf("bench: set all three stores, or none for the embedded ones: %w", err)
		}
		return func() {}, 0, nil
	}
	fmt.Fprintln(os.Stderr, "loomd bench: starting the embedded stores ...")
	stack, err := devstack.Start(ctx, devstack.Options{
		Dir: dir, Durable: true, KafkaPageCache: true, Topics: []string{cfg.Pipeline.Topic}, Partitions: cfg.Kafka.TopicPartitions, Log: os.Stderr,
	})
	if err != nil {
		return nil, 0, err
	}
	stack.Configure(cfg)
	cfg.Boot.Migrate = true
	return func() {
		if err := stack.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "loomd bench: stopping the embedded stores:", err)
		}
	}, stack.ClickHouse.PID(), nil
}

// benchTarget serves the process under test (every role), makes the bench's token, and
// can open, on the same stores, a second process that answers the same searches from
// ClickHouse, so the search scenario compares the two paths in one run. stop stops the
// process under test.
func benchTarget(ctx context.Context, cfg config.Config) (target bench.Target, stop func(), err error) {
	// The process under test traces into the lag scenario's hop recorder, unless the
	// configuration sends its traces elsewhere.
	var hops *bench.Hops
	trips := &bench.RoundTrips{}
	traced := []app.Option{app.WithPGTracer(trips)}
	if !cfg.Tracing.On() {
		hops = bench.NewHops()
		traced = append(traced, app.WithTracing(tracing.Recording(hops, hops.On)))
	}
	n, url, stop, err := serveOnLoopback(ctx, cfg, traced...)
	if err != nil {
		return bench.Target{}, nil, err
	}
	// Opened by the search scenario for its run only: its own followers (the knowledge
	// index's reads every record of the topic) would otherwise share the cores with
	// every other scenario's load.
	openClickHouse := func(ctx context.Context) (string, func(), error) {
		chCfg := cfg
		chCfg.Roles = config.Roles{config.RoleQuery}
		chCfg.SearchIndex.Mode = config.SearchIndexClickHouse
		chCfg.Boot.Migrate = false
		_, chURL, stopCH, err := serveOnLoopback(ctx, chCfg)
		if err != nil {
			return "", nil, fmt.Errorf("bench: the LOOM_SEARCH_INDEX=clickhouse process: %w", err)
		}
		return chURL, stopCH, nil
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	token, _, err := n.Tokens.Create(tctx, auth.NewToken{Org: benchOrg, Role: auth.RoleAdmin, Name: "loomd bench"})
	cancel()
	if err != nil {
		stop()
		return bench.Target{}, nil, fmt.Errorf("bench: create a token: %w", err)
	}
	openPeer := func(ctx context.Context, cfg config.Config, trips *bench.RoundTrips) (string, func(), error) {
		var opts []app.Option
		if trips != nil {
			opts = append(opts, app.WithPGTracer(trips))
		}
		_, url, stop, err := serveOnLoopback(ctx, cfg, opts...)
		return url, stop, err
	}
	return bench.Target{Process: n, URL: url, OpenClickHouse: openClickHouse, Token: token, Org: benchOrg, OpenPeer: openPeer, RoundTrips: trips, Hops: hops}, stop, nil
}

// serveOnLoopback opens a process of cfg and serves its API on a loopback port until
// stop is called.
func serveOnLoopback(ctx context.Context, cfg config.Config, opts ...app.Option) (n *app.Process, url string, stop func(), err error) {
	if n, err = app.Open(ctx, cfg, newLogger(cfg.LogLevel, os.Stderr), opts...); err != nil {
		return nil, "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.Close()
		return nil, "", nil, fmt.Errorf("bench: listen on loopback: %w", err)
	}
	serveCtx, stopServing := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- n.Run(serveCtx, ln) }()
	return n, "http://" + ln.Addr().String(), func() {
		stopServing()
		if err := <-served; err != nil {
			fmt.Fprintln(os.Stderr, "loomd bench: the process under test:", err)
		}
		n.Close()
	}, nil
}

// writeReportJSON writes the report to a temporary file beside path and renames it,
// so an interrupted run never leaves half a file where the last good one was.
func writeReportJSON(path string, report *bench.Report) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("bench --out: %w", err)
	}
	if err := report.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("bench --out: write %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench --out: write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("bench --out: %w", err)
	}
	return nil
}

// parseInts reads a comma-separated list of positive integers; "" is none.
func parseInts(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
