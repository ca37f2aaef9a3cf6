// Package bench measures how fast Loom is against the machine's own limits: every
// scenario runs Loom and a baseline (the same work done directly against the store
// underneath, or a release gate of docs/architecture.md) in the same run on the same
// machine, and reports the ratio. Absolute times on a shared machine mean little; a
// ratio to a baseline measured a moment before or after means more. `loomd bench`
// runs it against the embedded stores or configured ones; `make bench` writes
// docs/bench/results.json and docs/bench/RESULTS.md.
package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/config"
)

// Scenarios are the scenario names, in the order "all" runs them.
var Scenarios = []string{"set", "chain", "lag", "promote", "get", "history", "search", "pack", "recall", "coldstart", "bulk", "extract", "replay", "parts", "passes", "knowledge", "peers", "conversations"}

// Options choose what runs and for how long.
type Options struct {
	// Scenarios to run, by name; empty runs all of them.
	Scenarios []string
	// Duration is how long each measured run (one case, Loom or its baseline) lasts.
	Duration time.Duration
	// Concurrency overrides each scenario's default levels (set: 1, 8, 32; chain: 1, 8; get, history
	// and search: 5, the qualification profile of docs/architecture.md; lag and promote: 1; parts: 8).
	// Parts runs one load, at the first level; bulk and replay have no concurrency.
	Concurrency []int
	// SearchSizes are the namespace sizes the search scenario loads and searches.
	SearchSizes []int
	// SearchIndexOnly leaves the search scenario's ClickHouse path out: its searches take
	// seconds at 100k memories and fail on a loaded machine, where the index path is the
	// one being measured.
	SearchIndexOnly bool
	// PackTurns is how many conversation turns the pack scenario keeps (memory.observe)
	// beside its memories, in sessions of 100; the packs read the last session's.
	PackTurns int
	// GetRows is how many memories the get and history scenarios read among.
	GetRows int
	// BulkEntries is the size of one memory.bulk_set in the bulk scenario.
	BulkEntries int
	// ReplayRevisions is the fewest revisions the replay scenario replays: it writes
	// the shortfall first when the topic holds fewer.
	ReplayRevisions int
	// PeerSizes are the memory counts at which the peers scenario searches each system
	// (it adds up to the largest, one at a time).
	PeerSizes []int
	// PeersLoomOnly: the peers scenario runs Loom alone, without mem0 and chromem-go (a
	// measurement of Loom's adds and searches; its rows then have no baseline).
	PeersLoomOnly bool
	// KnowledgeDocs is how many documents the knowledge scenario ingests and searches
	// (a fifth each of text, Markdown, HTML, CSV and PDF; about 3.6 chunks each).
	KnowledgeDocs int
	// Passes names the passes scenario's single-pass cases (busyPasses' names); empty
	// measures each of them. The case with every pass at once always runs, and enables
	// every pass, the unnamed ones too.
	Passes []string
	// Conversations is the path of the conversation corpus the conversations scenario
	// loads and asks (tests/quality/conversations.json; relative to the working directory).
	Conversations string
	// Progress receives one line per step (stderr); nil discards.
	Progress io.Writer
	// Statements: the set and search scenarios also write, on Progress, the statements
	// each case sent Postgres per write or search, by text (every role's).
	Statements bool
	// SetKeyed: the set scenario also measures, in one namespace at each level, memory.set
	// sent with a fresh Idempotency-Key per call, beside the same raw commit.
	SetKeyed bool
}

// DefaultOptions are `make bench`'s: every scenario at a size that finishes in a
// few minutes on a 2-core machine.
func DefaultOptions() Options {
	return Options{
		Duration:        5 * time.Second,
		SearchSizes:     []int{10_000},
		PackTurns:       50_000,
		GetRows:         1000,
		BulkEntries:     1000,
		ReplayRevisions: 10_000,
		PeerSizes:       []int{1000, 10_000, 20_000},
		KnowledgeDocs:   160,
		Conversations:   "tests/quality/conversations.json",
	}
}

// Target is the Loom under test: a process (its stores, configuration and embedder) and
// the API it serves. For the replay scenario the process must also run the projector of
// its configured projection (the admin reset pauses it in-process, as in `loomd dev`).
type Target struct {
	Process *app.Process
	URL     string // base URL of the process's API
	Token   string // an admin token of Org
	Org     string
	// OpenClickHouse, when set, serves a second process on the same stores that answers
	// search from ClickHouse (LOOM_SEARCH_INDEX=clickhouse) until stop is called: the
	// search scenario measures both paths.
	OpenClickHouse func(ctx context.Context) (url string, stop func(), err error)
	// OpenPeer serves another process of cfg on the same stores (the peers scenario's
	// Loom, whose embedder is a scripted HTTP server) until stop is called; trips, when
	// set, counts the round trips its pool sends Postgres.
	OpenPeer func(ctx context.Context, cfg config.Config, trips *RoundTrips) (url string, stop func(), err error)
	// ClickHousePID, when the bench started the ClickHouse server, is its process: the
	// replay scenario reports the CPU it spent.
	ClickHousePID int
	// RoundTrips, when set, counts the round trips Process's pool sends Postgres.
	RoundTrips *RoundTrips
	// Hops, when set, records the spans of the process's writes while the lag scenario
	// splits commit→index into its hops (the process traces with tracing.Recording).
	Hops *Hops
}

// Run runs the chosen scenarios in order and returns the report. A scenario that
// fails ends the run with the report so far and the error.
func Run(ctx context.Context, t Target, opts Options) (*Report, error) {
	def := DefaultOptions()
	if opts.Duration <= 0 {
		opts.Duration = def.Duration
	}
	if len(opts.SearchSizes) == 0 {
		opts.SearchSizes = def.SearchSizes
	}
	if opts.GetRows <= 0 {
		opts.GetRows = def.GetRows
	}
	if opts.PackTurns <= 0 {
		opts.PackTurns = def.PackTurns
	}
	if opts.BulkEntries <= 0 {
		opts.BulkEntries = def.BulkEntries
	}
	if opts.ReplayRevisions <= 0 {
		opts.ReplayRevisions = def.ReplayRevisions
	}
	if len(opts.PeerSizes) == 0 {
		opts.PeerSizes = def.PeerSizes
	}
	if opts.KnowledgeDocs <= 0 {
		opts.KnowledgeDocs = def.KnowledgeDocs
	}
	if opts.Conversations == "" {
		opts.Conversations = def.Conversations
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Statements && t.RoundTrips != nil {
		t.RoundTrips.CountStatements()
	}
	names, err := ParseScenarios(strings.Join(opts.Scenarios, ","))
	if err != nil {
		return nil, err
	}
	api, err := newClient(t.URL, t.Token)
	if err != nil {
		return nil, err
	}
	r := &runner{
		t:     t,
		opts:  opts,
		api:   api,
		runID: strconv.FormatInt(time.Now().Unix(), 36),
		rng:   rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 8)),
	}
	report, err := r.describe(ctx, names)
	if err != nil {
		return nil, err
	}
	defer r.dropScratch()
	scenarios := map[string]func(context.Context) (*ScenarioResult, error){
		"set": r.set, "chain": r.chain, "lag": r.lag, "promote": r.promote, "get": r.get, "history": r.history, "search": r.search,
		"bulk": r.bulk, "extract": r.extract, "replay": r.replay, "parts": r.parts, "coldstart": r.coldstart,
		"pack":   r.pack,
		"recall": r.recall,
		"passes": r.passes,
		// knowledge.ingest MB/s vs the bare parse, knowledge.search vs memory.search.
		"knowledge": r.knowledge,
		"peers":     r.peers,
		// memory.search over the quality suite's conversation corpus (issue 34's p50 gate).
		"conversations": r.conversations,
	}
	for _, name := range names {
		r.progress("scenario %s", name)
		start := time.Now()
		res, err := scenarios[name](ctx)
		if err != nil {
			report.finish()
			return report, fmt.Errorf("scenario %s: %w", name, err)
		}
		res.Name = name
		res.Seconds = round(time.Since(start).Seconds(), 1)
		report.Scenarios = append(report.Scenarios, res)
	}
	report.finish()
	return report, nil
}

// ParseScenarios reads a comma-separated list of scenario names; empty or "all" is
// every scenario. The answer keeps the order of Scenarios.
func ParseScenarios(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" || strings.TrimSpace(list) == "all" {
		return slices.Clone(Scenarios), nil
	}
	want := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(Scenarios, s) {
			return nil, fmt.Errorf("unknown scenario %q (want one of %s, or all)", s, strings.Join(Scenarios, ", "))
		}
		want[s] = true
	}
	var out []string
	for _, s := range Scenarios {
		if want[s] {
			out = append(out, s)
		}
	}
	return out, nil
}

// runner is one run's shared state.
type runner struct {
	t     Target
	opts  Options
	api   *client.Client
	runID string     // makes this run's namespaces unique on stores that outlive it
	rng   *rand.Rand // values and queries; used by one goroutine at a time
	// hopCreated says the lag baseline created its scratch topic, to delete at the end.
	hopCreated bool
}

// namespace names a namespace of this run.
func (r *runner) namespace(parts ...string) string {
	return "bench-" + r.runID + "-" + strings.Join(parts, "-")
}

// levels is the concurrency levels of a scenario: the --concurrency override, or
// its defaults.
func (r *runner) levels(defaults ...int) []int {
	if len(r.opts.Concurrency) > 0 {
		return r.opts.Concurrency
	}
	return defaults
}

func (r *runner) progress(format string, args ...any) {
	fmt.Fprintf(r.opts.Progress, "bench: "+format+"\n", args...)
}

// waitUntil polls cond every poll until it holds, ctx ends or limit passes, saying
// what it waits for on the progress stream every 5 seconds.
func (r *runner) waitUntil(ctx context.Context, what string, limit, poll time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start, said := time.Now(), time.Now()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Since(said) >= 5*time.Second {
			r.progress("  waiting for %s (%s)", what, time.Since(start).Round(time.Second))
			said = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: gave up after %s: %w", what, time.Since(start).Round(time.Second), ctx.Err())
		case <-time.After(poll):
		}
	}
}
