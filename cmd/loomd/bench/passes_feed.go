package bench

import (
	"context"
	"fmt"
	"regexp"
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

// The passes scenario's feed: what gives the passes work, served on every side (the
// baseline's too) at a fixed pace, so it costs both sides alike.
const (
	passTouchEvery   = 25 * time.Millisecond  // one memory.touch (40/s): the usage fold's work
	passObserveEvery = 500 * time.Millisecond // one session of passDigestTurns turns: the digests' and reflections' work
	passFactEvery    = 500 * time.Millisecond // one user's preference: structured_profile's and profile_consolidation's work
	passUsers        = 20                     // users the sessions and preferences rotate over
)

// passConflictEvery paces a user's new home city, a conflict with the ones before: the
// conflict resolver's work.
const passConflictEvery = 500 * time.Millisecond

var passFeedNote = fmt.Sprintf("a memory.touch every %s, a session of %d turns observed every %s, a user's preference written every %s "+
	"and a user's conflicting home city every %s (a manual_review namespace), over %d users",
	passTouchEvery, passDigestTurns, passObserveEvery, passFactEvery, passConflictEvery, passUsers)

// passCities are the home cities the conflict feed states, one a write in turn.
var passCities = [][2]string{{"Lisbon", "Portugal"}, {"Berlin", "Germany"}, {"Madrid", "Spain"}, {"Vienna", "Austria"}, {"Oslo", "Norway"}}

// passProfileSchema is the users namespace's profile schema.
var passProfileSchema = map[string]any{
	"type": "object", "additionalProperties": false, "required": []string{"likes"},
	"properties": map[string]any{"likes": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}},
}

// passFeed is what every side is fed from and read with.
type passFeed struct {
	touched, graph, users string
	conflicts             string // the conflict feed's manual_review namespace
	conc                  int
	operator              string // reads the second process's /v1/health
	model                 *passesProvider
}

// passFeedSetup loads the namespaces the feed and the passes work in, and starts the
// scripted provider; cleanup stops it and revokes the operator's token.
func (r *runner) passFeedSetup(ctx context.Context) (f passFeed, cleanup func(), err error) {
	operator, p, err := r.t.Process.Tokens.Create(ctx, auth.NewToken{Role: auth.RoleOperator, Name: "loomd bench passes"})
	if err != nil {
		return f, nil, fmt.Errorf("create an operator token: %w", err)
	}
	f = passFeed{touched: r.namespace("passes", "touched"), graph: r.namespace("passes", "graph"), users: r.namespace("passes", "users"),
		conflicts: r.namespace("passes", "conflicts"), operator: operator}
	revoke := func() { _, _ = r.t.Process.Tokens.Revoke(context.WithoutCancel(ctx), "", p.TokenID) }
	fail := func(err error) (passFeed, func(), error) { revoke(); return passFeed{}, nil, err }
	if err := r.appendOnly(ctx, f.touched, f.graph); err != nil {
		return fail(err)
	}
	if _, err := r.api.Configure(ctx, f.users, client.NamespaceConfig{ConflictPolicy: "append_only", ProfileConsolidation: true, ReflectionDistill: true}); err != nil {
		return fail(fmt.Errorf("configure %s: %w", f.users, err))
	}
	if _, err := r.api.SetProfileSchema(ctx, f.users, passProfileSchema); err != nil {
		return fail(fmt.Errorf("set %s's profile schema: %w", f.users, err))
	}
	if _, err := r.api.Configure(ctx, f.conflicts, client.NamespaceConfig{ConflictPolicy: "manual_review"}); err != nil {
		return fail(fmt.Errorf("configure %s: %w", f.conflicts, err))
	}
	if err := r.load(ctx, f.touched, passesTouchKeys); err != nil {
		return fail(err)
	}
	if err := r.loadGraph(ctx, f.graph); err != nil {
		return fail(err)
	}
	f.model = startPassesProvider()
	return f, func() { f.model.Close(); revoke() }, nil
}

// passSide is one side's measure: memory.set's and memory.search's samples, what the
// passes and the feed did meanwhile, and the CPU per write.
type passSide struct {
	set, search Sample
	done        string
	// cpuSelf is this process's CPU (Loom under test, the second process, the bench's
	// client and feed) per memory.set during the set run; cpuTree adds the embedded
	// stores' (Postgres, ClickHouse: this process's children).
	cpuSelf, cpuTree float64
}

// mean is the side halfway between s and o: each figure their mean.
func (s passSide) mean(o passSide) passSide {
	avg := func(a, b Sample) Sample {
		return Sample{Concurrency: a.Concurrency, Calls: a.Calls + b.Calls, Errors: a.Errors + b.Errors, Seconds: a.Seconds + b.Seconds,
			PerSecond: round((a.PerSecond+b.PerSecond)/2, 1), P50MS: round((a.P50MS+b.P50MS)/2, 2), P99MS: round((a.P99MS+b.P99MS)/2, 2), MaxMS: max(a.MaxMS, b.MaxMS)}
	}
	return passSide{set: avg(s.set, o.set), search: avg(s.search, o.search), cpuSelf: (s.cpuSelf + o.cpuSelf) / 2, cpuTree: (s.cpuTree + o.cpuTree) / 2}
}

// rows adds a side's rows to res: against base (nil: the baseline itself).
func (s passSide) rows(res *ScenarioResult, name string, base *passSide) {
	if base != nil {
		for _, m := range []struct {
			what       string
			loom, none Sample
			rate       string
		}{{"memory.set", s.set, base.set, "writes/s"}, {"memory.search", s.search, base.search, "searches/s"}} {
			p50 := res.compare(name+", "+m.what, m.loom, m.none, m.rate)
			if !strings.Contains(name, "drift") {
				p50.Gate = fmt.Sprintf("p50 ≤ %g× no pass's: %s", passesGateRatio, passFail(m.loom.P50MS <= passesGateRatio*m.none.P50MS))
			}
		}
	} else {
		res.Rows = append(res.Rows, plainRow(name+", memory.set", "p50 ms", s.set.P50MS), plainRow(name+", memory.search", "p50 ms", s.search.P50MS))
	}
	res.Rows = append(res.Rows, plainRow(name+", memory.set", "CPU ms per write: this process", round(s.cpuSelf, 2)))
	if s.cpuTree > 0 {
		res.Rows = append(res.Rows, plainRow(name+", memory.set", "CPU ms per write: with the embedded stores", round(s.cpuTree, 2)))
	}
	if load, ok := load1(); ok {
		res.Rows = append(res.Rows, plainRow(name, "load average (1 min) at the end", load))
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%s: %s", name, s.done))
}

// quietWorkers is the second process's workers section with every pass off but c's.
func quietWorkers(base config.Workers, c passCase) config.Workers {
	w := base
	w.Resolver.Enabled, w.Entities.Enabled, w.Profiles.Enabled, w.SessionDigest.Enabled = false, false, false, false
	w.ProfileConsolidation.Enabled, w.ReflectionDistill.Enabled = false, false
	for _, p := range []*config.Pass{&w.UsageFold, &w.Recalibration, &w.Communities, &w.Embedding, &w.SensitivitySweep} {
		p.Enabled = false
	}
	w.Audit.Interval = 0
	c.enable(&w)
	return w
}

// withPasses serves a workers process running c's passes continuously, and the feed,
// while memory.set then memory.search run at level's concurrency; it answers both
// samples and what the passes did meanwhile, from the process's /v1/health.
func (r *runner) withPasses(ctx context.Context, c passCase, f passFeed, level string) (passSide, error) {
	if r.t.OpenPeer == nil {
		return passSide{}, fmt.Errorf("the passes scenario runs the passes in a second process: the target opens none (Target.OpenPeer)")
	}
	cfg := r.t.Process.Cfg
	cfg.Roles = config.Roles{config.RoleWorkers}
	cfg.Boot.Migrate = false
	cfg.Workers = quietWorkers(cfg.Workers, c)
	// Only this process calls the scripted provider: the process under test keeps its
	// own configuration on both sides.
	cfg.LLM.BaseURL, cfg.LLM.Model = f.model.URL, ScriptedModel
	url, stop, err := r.t.OpenPeer(ctx, cfg, nil)
	if err != nil {
		return passSide{}, fmt.Errorf("open the workers process of %s: %w", c.name, err)
	}
	defer stop()
	fctx, stopFeed := context.WithCancel(ctx)
	var counts feedCounts
	var wg sync.WaitGroup
	r.feed(fctx, f, &counts, &wg)
	settled := r.settleFeeds(ctx, cfg.Workers)
	fed0 := [4]int64{counts.touches.Load(), counts.sessions.Load(), counts.facts.Load(), counts.conflicts.Load()}
	before, calls := passRows(ctx, url, f.operator), f.model.calls()
	start, cpu0 := time.Now(), readCPU()
	var side passSide
	side.set, err = r.setLoad(ctx, "memory.set with "+c.name+" "+level, r.namespace("passes", "set", fmt.Sprint(f.conc)), 1, f.conc, r.opts.Duration)
	cpu := readCPU().sub(cpu0)
	if err == nil {
		side.cpuSelf = cpu.self.Seconds() * 1000 / float64(max(side.set.Calls, 1))
		side.cpuTree = cpu.tree.Seconds() * 1000 / float64(max(side.set.Calls, 1))
		side.search, err = r.searchLoad(ctx, "memory.search with "+c.name+" "+level, f.touched, f.conc)
	}
	took := time.Since(start)
	stopFeed()
	wg.Wait()
	after := passRows(ctx, url, f.operator)
	var did []string
	for name, n := range after {
		did = append(did, fmt.Sprintf("%s %d (%.1f/s)", name, n-before[name], float64(n-before[name])/took.Seconds()))
	}
	sort.Strings(did)
	side.done = fmt.Sprintf("rows done during the run: %s; fed %d touches, %d sessions, %d preferences, %d conflicting cities; %d model calls%s",
		strings.Join(did, ", "), counts.touches.Load()-fed0[0], counts.sessions.Load()-fed0[1], counts.facts.Load()-fed0[2],
		counts.conflicts.Load()-fed0[3], f.model.calls()-calls, settled)
	return side, err
}

// searchLoad searches ns with the vocabulary's sentences from conc workers for the
// run's duration.
func (r *runner) searchLoad(ctx context.Context, label, ns string, conc int) (Sample, error) {
	rands := r.workerRands(conc)
	return r.closedLoop(ctx, label, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
		_, err := r.api.Search(ctx, ns, client.SearchRequest{Query: sentence(rands[w]), TopK: 10})
		return err
	})
}

// feedCounts counts what the feed did.
type feedCounts struct{ touches, sessions, facts, conflicts atomic.Int64 }

// feed runs the feed's three paced loops until ctx ends.
func (r *runner) feed(ctx context.Context, f passFeed, n *feedCounts, wg *sync.WaitGroup) {
	loop := func(every time.Duration, step func(i int) error, count *atomic.Int64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for i := 0; ctx.Err() == nil; i++ {
				if step(i) == nil {
					count.Add(1)
				}
				select {
				case <-ctx.Done():
				case <-t.C:
				}
			}
		}()
	}
	run, rng := time.Now().UnixNano(), r.workerRands(1)[0]
	loop(passTouchEvery, func(i int) error {
		_, err := r.api.Touch(ctx, f.touched, loadKey(i%passesTouchKeys), client.Identity{})
		return err
	}, &n.touches)
	loop(passObserveEvery, func(i int) error { return r.observeSession(ctx, f.users, fmt.Sprintf("s-%d-%d", run, i), i) }, &n.sessions)
	loop(passFactEvery, func(i int) error {
		user := fmt.Sprintf("bench-user-%d", i%passUsers)
		_, err := r.api.Set(ctx, f.users, fmt.Sprintf("likes-%d", i%(3*passUsers)), client.SetRequest{
			Identity: client.Identity{UserID: user}, MemoryType: "preference", Value: user + " likes " + sentence(rng)})
		return err
	}, &n.facts)
	loop(passConflictEvery, func(i int) error {
		// Two writes a user in a row, so every second write conflicts with the one before.
		user, city := fmt.Sprintf("bench-user-%d", (i/2)%passUsers), passCities[i%len(passCities)]
		_, err := r.api.Set(ctx, f.conflicts, fmt.Sprintf("home-%d-%d", run, i), client.SetRequest{Identity: client.Identity{UserID: user},
			Value: fmt.Sprintf("The user %s lives in the city of %s in %s", user, city[0], city[1])})
		return err
	}, &n.conflicts)
}

// observeSession observes one session of passDigestTurns turns of one of the users.
func (r *runner) observeSession(ctx context.Context, ns, session string, i int) error {
	req := client.ObserveRequest{Identity: client.Identity{UserID: fmt.Sprintf("bench-user-%d", i%passUsers), SessionID: session}}
	for j := range passDigestTurns {
		role := "user"
		if j%2 == 1 {
			role = "assistant"
		}
		req.Turns = append(req.Turns, client.ObservedTurn{Role: role, Content: fmt.Sprintf("turn %d of session %d", j, i)})
	}
	_, err := r.api.Observe(ctx, ns, req)
	return err
}

// passesProvider is the scripted model the passes' process calls: an answer held to
// each model pass's schema, and memory.consolidate's, counted; any other call is refused.
type passesProvider struct {
	*llmtest.Server
	owner *owner
	n     atomic.Int64
}

func startPassesProvider() *passesProvider {
	o := &owner{}
	p := &passesProvider{Server: llmtest.New(o), owner: o}
	p.Script(func(req llmtest.ChatRequest) llmtest.Reply {
		n := p.n.Add(1)
		switch req.SchemaName {
		case "session_digest":
			return llmtest.JSON(map[string]any{"digest": "The user and the agent exchanged three turns."})
		case "entity_extraction":
			return llmtest.JSON(map[string]any{"entities": []map[string]any{{"name": "Bench", "type": "project", "aliases": []string{}}}, "relations": []any{}})
		case "structured_profile":
			return llmtest.JSON(map[string]any{"likes": []string{"tea"}})
		case "profile_section":
			return llmtest.JSON(map[string]any{"preferences": []string{"The user likes tea."}, "decisions": []string{}})
		case "reflection_distill":
			return llmtest.JSON(map[string]any{"outcome": "unclear", "reflections": []string{}})
		case "conflict_judgements":
			return llmtest.JSON(map[string]any{"judgements": passJudgements(req)})
		case "consolidated_memory":
			return llmtest.JSON(map[string]any{"key": fmt.Sprintf("merged-%d", n), "summary": "The user drinks a dark roast coffee every morning."})
		}
		return llmtest.Status(400, "the passes bench does not script "+req.SchemaName)
	})
	return p
}

func (p *passesProvider) calls() int64 { return p.n.Load() }

// passPeerLabel is a peer's line in a resolver's prompt (workers/resolver_prompt.go).
var passPeerLabel = regexp.MustCompile(`(?m)^(p\d+) \(key `)

// passJudgements judges every peer of a resolver's prompt related to the new
// statement, sure enough to clear the flag its admission set between them.
func passJudgements(req llmtest.ChatRequest) []map[string]any {
	var out []map[string]any
	for _, m := range passPeerLabel.FindAllStringSubmatch(req.Text(), -1) {
		out = append(out, map[string]any{"peer": m[1], "reason": "the user moved", "same_entity": true, "same_attribute": false,
			"verdict": "related", "confidence": 0.95})
	}
	return out
}

// Close stops the server.
func (p *passesProvider) Close() { _ = p.owner.finish() }
