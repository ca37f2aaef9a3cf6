package bench

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
)

// extractFacts is how many facts (one per message) each transcript of the extract
// scenario states.
const extractFacts = 10

// ScriptedModel is the model name `loomd bench` gives the scripted provider.
const ScriptedModel = "bench-scripted"

// ScriptedProvider is an OpenAI-compatible server that answers the extract scenario's
// calls at once: every "[n] user: I like X." of the transcript is a fact. `loomd
// bench` points the process under test at it when no provider is configured, so the
// scenario measures Loom's pipeline, not a model.
type ScriptedProvider struct {
	*llmtest.Server
	owner *owner
}

// StartScriptedProvider starts one; Close stops it and reports what went wrong.
func StartScriptedProvider() *ScriptedProvider {
	o := &owner{}
	srv := llmtest.New(o)
	stated := regexp.MustCompile(`\[(\d+)\] user: I like (\w+)\.`)
	srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		facts := []any{}
		for _, m := range stated.FindAllStringSubmatch(r.Text(), -1) {
			i, _ := strconv.Atoi(m[1])
			facts = append(facts, map[string]any{"key": "user.likes_" + m[2], "value": "Likes " + m[2], "message_index": i, "tags": []any{}, "about": "user"})
		}
		return llmtest.JSON(map[string]any{"facts": facts, "forget": []any{}})
	})
	return &ScriptedProvider{Server: srv, owner: o}
}

// Close stops the server; an error is a call the script could not answer.
func (p *ScriptedProvider) Close() error { return p.owner.finish() }

// owner is the llmtest.Owner of a server outside a test.
type owner struct {
	cleanups []func()
	errs     []string
}

func (o *owner) Cleanup(f func()) { o.cleanups = append(o.cleanups, f) }
func (o *owner) Errorf(format string, args ...any) {
	o.errs = append(o.errs, fmt.Sprintf(format, args...))
}
func (o *owner) finish() error {
	for i := len(o.cleanups) - 1; i >= 0; i-- {
		o.cleanups[i]()
	}
	if len(o.errs) > 0 {
		return fmt.Errorf("the scripted provider: %s", o.errs[0])
	}
	return nil
}

// extract measures memory.set_from_messages of a transcript of extractFacts facts
// against a memory.bulk_set of the same facts, each rep into a fresh namespace: the
// pipeline's time per request with the provider's own time (model_ms) subtracted, and
// its round trips to the provider. The "inputs kept vs without" is a pair of
// processes of the command role alone on the same stores, one keeping the inputs and
// one not (LOOM_EXTRACTION_KEEP_INPUTS off), each rep's two extractions back to back,
// with the round trips and statements each one's pool sent Postgres per request.
func (r *runner) extract(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title:    fmt.Sprintf("memory.set_from_messages of a %d-fact transcript, ms per request", extractFacts),
		Baseline: fmt.Sprintf("memory.bulk_set of the same %d facts; for the inputs rows, the same extraction keeping no inputs", extractFacts),
		Notes: []string{"Loom's time is the request's wall time less model_ms, the time it waited for the provider; " +
			"against the scripted provider of `loomd bench` unless LOOM_LLM_BASE_URL names one",
			"inputs kept vs none: two processes of the command role alone on the same stores, one keeping the inputs and one with " +
				"LOOM_EXTRACTION_KEEP_INPUTS=false (the facts' commit writes no turn, chunk or belief-source link, and no " +
				"memory.turns_observed record), each rep's two extractions back to back, in turns which goes first; round trips and statements are what each " +
				"process's pool sent Postgres (its index follower's key reads included), over its requests"},
	}
	kept, bare, stop, err := r.inputsPair(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	var fromTook, bareTook, bulkTook []time.Duration
	var calls, modelMs float64
	start := time.Now()
	keptCost, bareCost := tripsMark{kept.trips, kept.trips.Count(), kept.trips.Statements()}, tripsMark{bare.trips, bare.trips.Count(), bare.trips.Statements()}
	for rep := 0; rep == 0 || time.Since(start) < r.opts.Duration; rep++ {
		var msgs []client.Message
		var batch []client.BulkEntry
		for i := range extractFacts {
			thing := fmt.Sprintf("thing%dx%d", rep, i)
			msgs = append(msgs, client.Message{Role: "user", Content: "I like " + thing + "."})
			batch = append(batch, client.BulkEntry{Key: "user.likes_" + thing, Value: "Likes " + thing})
		}
		// The pair runs in turns, the kept one first in even reps and second in odd
		// ones, so neither side always meets what the other left (a checkpoint, the relay).
		var took, tookBare time.Duration
		var a *client.FromMessagesAnswer
		for _, keep := range [][]bool{{true, false}, {false, true}}[rep%2] {
			if keep {
				took, a, err = r.extractOnce(ctx, kept.api, r.namespace("extract", fmt.Sprint(rep)), msgs, true)
			} else {
				tookBare, _, err = r.extractOnce(ctx, bare.api, r.namespace("extractbare", fmt.Sprint(rep)), msgs, false)
			}
			if err != nil {
				return nil, err
			}
		}
		fromTook, calls, modelMs = append(fromTook, took), calls+float64(a.ModelCalls), modelMs+a.ModelMs
		bareTook = append(bareTook, tookBare)
		t0 := time.Now()
		if _, err := r.api.BulkSet(ctx, r.namespace("extractbulk", fmt.Sprint(rep)), client.BulkSetRequest{Entries: batch}); err != nil {
			return nil, fmt.Errorf("memory.bulk_set: %w", err)
		}
		bulkTook = append(bulkTook, time.Since(t0))
		r.progress("  memory.set_from_messages: %s besides %.1f ms of the provider's (%s keeping no inputs); memory.bulk_set: %s",
			took.Round(time.Millisecond), a.ModelMs, tookBare.Round(time.Millisecond), bulkTook[len(bulkTook)-1].Round(time.Millisecond))
	}
	n := float64(len(fromTook))
	name := fmt.Sprintf("%d facts", extractFacts)
	res.add(name, "ms per request, the provider's time subtracted (mean)", meanMS(fromTook), meanMS(bulkTook))
	res.add(name, "model round trips per request", round(calls/n, 2), 0)
	res.add(name, "provider ms per request (mean)", round(modelMs/n, 2), 0)
	inputs := name + ", inputs kept vs none"
	res.add(inputs, "ms per request, the provider's time subtracted (mean)", meanMS(fromTook), meanMS(bareTook))
	res.add(inputs, "ms per request, the provider's time subtracted (p50)", medianMS(fromTook), medianMS(bareTook))
	keptTrips, keptStmts := keptCost.per(n)
	bareTrips, bareStmts := bareCost.per(n)
	res.add(inputs, "Postgres round trips per request", keptTrips, bareTrips)
	res.add(inputs, "Postgres statements per request", keptStmts, bareStmts)
	res.Samples = append(res.Samples, CaseSamples{Case: name,
		Loom:     Sample{Concurrency: 1, Calls: len(fromTook), Seconds: round(sum(fromTook).Seconds(), 2)},
		Baseline: &Sample{Concurrency: 1, Calls: len(bulkTook), Seconds: round(sum(bulkTook).Seconds(), 2)}},
		CaseSamples{Case: inputs,
			Loom:     Sample{Concurrency: 1, Calls: len(fromTook), Seconds: round(sum(fromTook).Seconds(), 2)},
			Baseline: &Sample{Concurrency: 1, Calls: len(bareTook), Seconds: round(sum(bareTook).Seconds(), 2)}})
	return res, nil
}

// tripsMark is what a pool had sent at a mark.
type tripsMark struct {
	trips            *RoundTrips
	sent, statements int64
}

// per is the round trips and statements sent since the mark, per one of n requests.
func (m tripsMark) per(n float64) (trips, statements float64) {
	if m.trips == nil || n == 0 {
		return 0, 0
	}
	return round(float64(m.trips.Count()-m.sent)/n, 2), round(float64(m.trips.Statements()-m.statements)/n, 2)
}

// stop closes the mark's span at what the pool has sent so far (per then counts against
// a frozen copy of the counters): a case's baseline that runs after it on the same pool
// (a pgx SELECT, a search) is not counted as the case's.
func (m tripsMark) stop() tripsMark {
	if m.trips == nil {
		return m
	}
	frozen := &RoundTrips{}
	frozen.n.Store(m.trips.Count())
	frozen.statements.Store(m.trips.Statements())
	return tripsMark{frozen, m.sent, m.statements}
}

// tripsMark marks what the process under test's pool has sent so far.
func (r *runner) tripsMark() tripsMark {
	t := r.t.RoundTrips
	return tripsMark{t, t.Count(), t.Statements()}
}

// tripsNote says what the read scenarios' round-trip rows count.
const tripsNote = "Postgres round trips and statements per call: what the process under test's pool sent during the run " +
	"(every role's: the relay's and the workers' polls too), over the calls answered; a baseline that is not Loom's reads shows 0"

// addTrips adds the round trips and statements per call a case's sides cost.
func (res *ScenarioResult) addTrips(name string, loomMark tripsMark, loom Sample, baseMark tripsMark, base Sample) {
	if loomMark.trips == nil {
		return
	}
	lt, ls := loomMark.per(float64(loom.Calls))
	bt, bs := baseMark.per(float64(base.Calls))
	res.add(name, "Postgres round trips per call", lt, bt)
	res.add(name, "Postgres statements per call", ls, bs)
}

// extractOnce runs one memory.set_from_messages through api and answers its time less
// the provider's; kept says whether the answer must name the transcript's turns.
func (r *runner) extractOnce(ctx context.Context, api *client.Client, ns string, msgs []client.Message, kept bool) (time.Duration, *client.FromMessagesAnswer, error) {
	t0 := time.Now()
	a, err := api.FromMessages(ctx, ns, client.FromMessagesRequest{Messages: msgs})
	if err != nil {
		return 0, nil, fmt.Errorf("memory.set_from_messages: %w", err)
	}
	took := time.Since(t0) - time.Duration(a.ModelMs*float64(time.Millisecond))
	if len(a.Facts) != extractFacts {
		return 0, nil, fmt.Errorf("memory.set_from_messages extracted %d facts, want %d (is the provider the scripted one?)", len(a.Facts), extractFacts)
	}
	if (len(a.TurnIDs) == len(msgs)) != kept {
		return 0, nil, fmt.Errorf("memory.set_from_messages kept %d turns of %d; want them kept: %t", len(a.TurnIDs), len(msgs), kept)
	}
	return took, a, nil
}

// peer is a second process the scenario serves on the same stores: its client and
// the round trips its pool sends.
type peer struct {
	api   *client.Client
	trips *RoundTrips
}

// inputsPair serves two command processes on the same stores, one keeping the inputs
// and one not (LOOM_EXTRACTION_KEEP_INPUTS off), each counting its round trips.
func (r *runner) inputsPair(ctx context.Context) (kept, bare peer, stop func(), err error) {
	if r.t.OpenPeer == nil {
		return peer{}, peer{}, nil, fmt.Errorf("the extract scenario runs its inputs cases in two more processes: the target opens none (Target.OpenPeer)")
	}
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	for _, keep := range []bool{true, false} {
		cfg := r.t.Process.Cfg
		cfg.Roles = config.Roles{config.RoleCommand}
		cfg.Boot.Migrate = false
		cfg.Command.Extraction.QueueEnabled = false
		cfg.Command.Extraction.KeepInputs = keep
		p := peer{trips: &RoundTrips{}}
		url, stopPeer, err := r.t.OpenPeer(ctx, cfg, p.trips)
		if err != nil {
			stop()
			return peer{}, peer{}, nil, fmt.Errorf("open the process that keeps inputs %t: %w", keep, err)
		}
		stops = append(stops, stopPeer)
		if p.api, err = newClient(url, r.t.Token); err != nil {
			stop()
			return peer{}, peer{}, nil, err
		}
		if keep {
			kept = p
		} else {
			bare = p
		}
	}
	return kept, bare, stop, nil
}

// medianMS is the middle of took, in milliseconds.
func medianMS(took []time.Duration) float64 {
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	return ms(percentile(sorted, 0.5))
}
