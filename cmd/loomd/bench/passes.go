package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
)

// passesTouchKeys is how many memories the passes scenario keeps touched.
const passesTouchKeys = 200

// passesGraphRows is how many memories, each naming three entities, give the
// entity_communities pass a co-occurrence graph to cluster.
const passesGraphRows = 200

// passesGateRatio is issue 32's target: memory.set's p50 with the passes running
// within 1.2× its p50 with none, in the same run.
const passesGateRatio = 1.2

// passInterval is the busy side's pace: a pass starts 50 ms after the last ended, so
// each runs back to back for the whole measured run.
const passInterval = 50 * time.Millisecond

// passCase is one busy side: the passes a second process (the workers role alone, on
// the same stores) runs continuously while memory.set is measured, and whether
// memory.touch loops feed the usage fold beside the writes.
type passCase struct {
	name    string
	enable  func(w *config.Workers)
	touches bool
	// observes: one memory.observe loop beside the writes keeps sessions owing a
	// digest (a new session of passDigestTurns turns a call).
	observes bool
}

// passDigestTurns is the turns of one observed session: the session_digest case's
// sessions owe a digest at once (LOOM_SESSION_DIGEST_MIN_TURNS set to it).
const passDigestTurns = 3

// busyPasses are the passes measured, each alone and then all at once. session_digest
// calls the bench's scripted provider, which answers at once: its case measures what
// the pass costs the stores, not the model's time. The other passes that call a model
// (conflict resolver, entity extractor, structured_profile, profile_consolidation,
// reflection_distill) are not measured yet.
var busyPasses = []passCase{
	// A pass counts its rows at its end (workers/passes.go, account): a usage fold of a
	// whole batch (every touched memory, a commit each), or a recalibration or
	// communities pass over every namespace its batch of records names (the bench's
	// writes make theirs due, and its interval lets each be worked again at once)
	// outlasts the measured run at load and shows none. Smaller passes make their rows
	// show.
	{name: "usage_fold", enable: func(w *config.Workers) { busyPass(&w.UsageFold); w.UsageFold.Batch = 20 }, touches: true},
	{name: "recalibration", enable: func(w *config.Workers) { busyPass(&w.Recalibration); w.Recalibration.Batch = 1 }},
	{name: "entity_communities", enable: func(w *config.Workers) { busyPass(&w.Communities); w.Communities.Batch = 1 }},
	{name: "embedding_worker", enable: func(w *config.Workers) { busyPass(&w.Embedding) }},
	{name: "sensitivity_sweep", enable: func(w *config.Workers) { busyPass(&w.SensitivitySweep) }},
	{name: "audit_checkpoints", enable: func(w *config.Workers) { w.Audit.Interval = passInterval }},
	{name: "session_digest", observes: true, enable: func(w *config.Workers) {
		w.SessionDigest.Enabled, w.SessionDigest.Interval, w.SessionDigest.MinTurns = true, passInterval, passDigestTurns
	}},
}

func busyPass(p *config.Pass) { p.Enabled, p.Interval = true, passInterval }

// passes measures memory.set's latency while each background pass that needs no model
// runs continuously in a second process on the same stores, then all of them at once,
// against memory.set with none running, in the same run (issue 32's target: within
// 1.2×); a second run with none closes the scenario, so the drift of a shared machine
// shows beside the ratios. The process under test runs its own passes at their
// configured cadence on both sides (the notes name the ones on): run the bench with
// them off (LOOM_USAGE_FOLD_ENABLED=false, ...) for a baseline with none at all.
func (r *runner) passes(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title:    "memory.set with the background passes running",
		Baseline: "memory.set with no pass running in the second process, at the same concurrency, in the same run",
		Notes:    []string{"the passes run in a second process (the workers role alone) of this bench, on the same stores, each started " + passInterval.String() + " after the last ended; the usage fold's side also serves one memory.touch loop per writer"},
	}
	res.Notes = append(res.Notes, r.ownPasses())
	// An operator's token reads the second process's /v1/health: what its passes did.
	operator, p, err := r.t.Process.Tokens.Create(ctx, auth.NewToken{Role: auth.RoleOperator, Name: "loomd bench passes"})
	if err != nil {
		return nil, fmt.Errorf("create an operator token: %w", err)
	}
	defer r.t.Process.Tokens.Revoke(context.WithoutCancel(ctx), "", p.TokenID)
	touched := r.namespace("passes", "touched")
	graph := r.namespace("passes", "graph")
	for _, ns := range []string{touched, graph} {
		if err := r.appendOnly(ctx, ns); err != nil {
			return nil, err
		}
	}
	if err := r.load(ctx, touched, passesTouchKeys); err != nil {
		return nil, err
	}
	if err := r.loadGraph(ctx, graph); err != nil {
		return nil, err
	}
	model := startPassesProvider()
	defer model.Close()
	all := passCase{name: "every pass above", touches: true, observes: true, enable: func(w *config.Workers) {
		for _, c := range busyPasses {
			c.enable(w)
		}
	}}
	for _, conc := range r.levels(8) {
		level := fmt.Sprintf("concurrency=%d", conc)
		set := func(label, side string) (Sample, error) {
			return r.setLoad(ctx, "memory.set "+label+" "+level, r.namespace("passes", side, fmt.Sprint(conc)), 1, conc, r.opts.Duration)
		}
		none, err := set("with no pass", "none")
		if err != nil {
			return nil, err
		}
		for _, c := range append(append([]passCase{}, busyPasses...), all) {
			busy, done, err := r.withPasses(ctx, c, passFeed{touched, conc, operator, model}, func() (Sample, error) { return set("with "+c.name, "busy") })
			if err != nil {
				return nil, err
			}
			p50 := res.compare(level+", "+c.name, busy, none, "writes/s")
			p50.Gate = fmt.Sprintf("p50 ≤ %g× no pass's: %s", passesGateRatio, passFail(busy.P50MS <= passesGateRatio*none.P50MS))
			res.Notes = append(res.Notes, fmt.Sprintf("%s, %s: %s", level, c.name, done))
		}
		again, err := set("with no pass, again", "none-again")
		if err != nil {
			return nil, err
		}
		res.compare(level+", no pass again (the machine's drift)", again, none, "writes/s")
	}
	return res, nil
}

// ownPasses names the passes the process under test runs itself, on both sides.
func (r *runner) ownPasses() string {
	cfg := r.t.Process.Cfg
	if !cfg.Roles.Has(config.RoleWorkers) {
		return "the process under test runs no pass (no workers role)"
	}
	w := cfg.Workers
	var on []string
	for name, p := range map[string]config.Pass{"usage_fold": w.UsageFold, "recalibration": w.Recalibration,
		"entity_communities": w.Communities, "embedding_worker": w.Embedding, "sensitivity_sweep": w.SensitivitySweep} {
		if p.Enabled {
			on = append(on, fmt.Sprintf("%s every %s", name, p.Interval))
		}
	}
	if w.Audit.Interval > 0 {
		on = append(on, fmt.Sprintf("audit_checkpoints every %s", w.Audit.Interval))
	}
	if len(on) == 0 {
		return "the process under test runs none of these passes itself: the baseline has none running"
	}
	sort.Strings(on)
	return "the process under test runs, on both sides, at its configured cadence: " + strings.Join(on, ", ")
}

// loadGraph writes passesGraphRows memories into ns, each naming three of thirty
// entities, so the namespace has a co-occurrence graph.
func (r *runner) loadGraph(ctx context.Context, ns string) error {
	r.progress("  loading %d memories naming entities into %s", passesGraphRows, ns)
	entries := r.bulkEntries(0, passesGraphRows, loadKey)
	for i := range entries {
		for j := range 3 {
			entries[i].Entities = append(entries[i].Entities, client.Entity{Name: fmt.Sprintf("Entity %02d", (i*7+j*11)%30)})
		}
	}
	return r.retrying(ctx, func() error {
		_, err := r.api.BulkSet(ctx, ns, client.BulkSetRequest{Entries: entries}, client.IdempotencyKey(ns+"-graph"))
		return err
	})
}

// withPasses serves a workers process running c's passes continuously (and, for the
// usage fold, touch loops beside the writes) while measure runs, and answers what the
// passes did meanwhile, from the process's /v1/health.
func (r *runner) withPasses(ctx context.Context, c passCase, f passFeed, measure func() (Sample, error)) (Sample, string, error) {
	touched, conc, operator := f.touched, f.conc, f.operator
	if r.t.OpenPeer == nil {
		return Sample{}, "", fmt.Errorf("the passes scenario runs the passes in a second process: the target opens none (Target.OpenPeer)")
	}
	cfg := r.t.Process.Cfg
	cfg.Roles = config.Roles{config.RoleWorkers}
	cfg.Boot.Migrate = false
	quiet := cfg.Workers
	quiet.Resolver.Enabled, quiet.Entities.Enabled, quiet.Profiles.Enabled, quiet.SessionDigest.Enabled = false, false, false, false
	quiet.ProfileConsolidation.Enabled, quiet.ReflectionDistill.Enabled = false, false
	for _, p := range []*config.Pass{&quiet.UsageFold, &quiet.Recalibration, &quiet.Communities, &quiet.Embedding, &quiet.SensitivitySweep} {
		p.Enabled = false
	}
	quiet.Audit.Interval = 0
	c.enable(&quiet)
	cfg.Workers = quiet
	// Only this process calls the scripted provider: the process under test keeps its
	// own configuration on both sides.
	cfg.LLM.BaseURL, cfg.LLM.Model = f.model.URL, ScriptedModel
	url, stop, err := r.t.OpenPeer(ctx, cfg, nil)
	if err != nil {
		return Sample{}, "", fmt.Errorf("open the workers process of %s: %w", c.name, err)
	}
	defer stop()
	var touches, observed atomic.Int64
	tctx, stopTouches := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if c.observes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.observeLoop(tctx, touched, &observed)
		}()
	}
	if c.touches {
		for w := 0; w < conc; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; tctx.Err() == nil; i += conc {
					if _, err := r.api.Touch(tctx, touched, loadKey(i%passesTouchKeys), client.Identity{}); err == nil {
						touches.Add(1)
					}
				}
			}()
		}
	}
	before, calls := passRows(ctx, url, operator), f.model.calls()
	start := time.Now()
	sample, err := measure()
	took := time.Since(start)
	stopTouches()
	wg.Wait()
	after := passRows(ctx, url, operator)
	var did []string
	for name, n := range after {
		did = append(did, fmt.Sprintf("%s %d (%.1f/s)", name, n-before[name], float64(n-before[name])/took.Seconds()))
	}
	sort.Strings(did)
	done := "rows done during the run: " + strings.Join(did, ", ")
	if c.touches {
		done += fmt.Sprintf("; %d touches made beside the writes", touches.Load())
	}
	if c.observes {
		done += fmt.Sprintf("; %d sessions of %d turns observed beside the writes, %d model calls", observed.Load(), passDigestTurns, f.model.calls()-calls)
	}
	return sample, done, err
}

// passFeed is what a busy side is fed from: the namespace its touch and observe loops
// write into, the writers' concurrency, the operator's token that reads the process's
// health, and the scripted model it calls.
type passFeed struct {
	touched  string
	conc     int
	operator string
	model    *passesProvider
}

// passRows reads the rows each enabled pass of the process at url has done, as the
// operator's /v1/health shows them.
func passRows(ctx context.Context, url, operator string) map[string]int64 {
	out := map[string]int64{}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/health", nil)
	if err != nil {
		return out
	}
	req.Header.Set("Authorization", "Bearer "+operator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	var h struct {
		Passes map[string]struct {
			Enabled  bool  `json:"enabled"`
			RowsDone int64 `json:"rows_done"`
		} `json:"passes"`
	}
	if json.NewDecoder(resp.Body).Decode(&h) != nil {
		return out
	}
	for name, p := range h.Passes {
		if p.Enabled {
			out[name] = p.RowsDone
		}
	}
	return out
}

// observeLoop keeps sessions owing a digest while ctx lasts: one memory.observe of a new
// session of passDigestTurns turns after another, counted in n.
func (r *runner) observeLoop(ctx context.Context, ns string, n *atomic.Int64) {
	for i := 0; ctx.Err() == nil; i++ {
		req := client.ObserveRequest{Identity: client.Identity{UserID: "bench-user", SessionID: fmt.Sprintf("digest-%d-%d", time.Now().UnixNano(), i)}}
		for j := range passDigestTurns {
			role := "user"
			if j%2 == 1 {
				role = "assistant"
			}
			req.Turns = append(req.Turns, client.ObservedTurn{Role: role, Content: fmt.Sprintf("turn %d of session %d", j, i)})
		}
		if _, err := r.api.Observe(ctx, ns, req); err == nil {
			n.Add(1)
		}
	}
}

// passesProvider is the scripted model the passes' process calls: a digest for the
// session_digest pass, counted; any other call is refused.
type passesProvider struct {
	*llmtest.Server
	owner *owner
	n     atomic.Int64
}

func startPassesProvider() *passesProvider {
	o := &owner{}
	p := &passesProvider{Server: llmtest.New(o), owner: o}
	p.Script(func(req llmtest.ChatRequest) llmtest.Reply {
		p.n.Add(1)
		if req.SchemaName == "session_digest" {
			return llmtest.JSON(map[string]any{"digest": "The user and the agent exchanged three turns."})
		}
		return llmtest.Status(400, "the passes bench scripts session_digest alone")
	})
	return p
}

func (p *passesProvider) calls() int64 { return p.n.Load() }

// Close stops the server.
func (p *passesProvider) Close() { _ = p.owner.finish() }
