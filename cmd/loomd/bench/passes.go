package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
)

// passesTouchKeys is how many memories the passes scenario keeps touched.
const passesTouchKeys = 200

// passesGraphRows is how many memories, each naming three entities, give the
// entity_communities pass a co-occurrence graph to cluster.
const passesGraphRows = 200

// passesGateRatio is issue 32's target: memory.set's and memory.search's p50 with the
// passes running within 1.2× their p50 with none, in the same run.
const passesGateRatio = 1.2

// passInterval is the busy side's pace: a pass starts 50 ms after the last ended, so
// each runs back to back for the whole measured run (as far as the process's pacing,
// LOOM_WORKERS_PASS_*, lets it).
const passInterval = 50 * time.Millisecond

// passCase is one side: the passes a second process (the workers role alone, on the
// same stores) runs continuously while memory.set and memory.search are measured.
type passCase struct {
	name   string
	enable func(w *config.Workers)
}

// passDigestTurns is the turns of one observed session: the session_digest case's
// sessions owe a digest at once (LOOM_SESSION_DIGEST_MIN_TURNS set to it).
const passDigestTurns = 3

// passModelBatch is the model passes' batch in the bench (their defaults are 20 to 40).
const passModelBatch = 5

// noPass is the baseline side: the second process runs, with every pass off.
var noPass = passCase{name: "no pass", enable: func(*config.Workers) {}}

// busyPasses are the passes measured, each alone and then all at once. The model
// passes call the bench's scripted provider, which answers at once: their cases
// measure what the passes cost the stores, not a model's time.
var busyPasses = []passCase{
	// The conflict resolver judges the writes their admission marked: the feed's
	// conflicting statements (passConflictEvery, a manual_review namespace, where a
	// close peer that says something else is a conflict whatever the process's own
	// resolver), each cleared by the scripted judge, a commit per pair.
	{name: "conflict_resolver", enable: func(w *config.Workers) {
		w.Resolver.Enabled, w.Resolver.Interval, w.Resolver.Batch = true, passInterval, passModelBatch
	}},
	// A pass counts its rows at its end (workers/passes.go, account): a usage fold of a
	// whole batch (every touched memory, a commit each), or a recalibration or
	// communities pass over every namespace its batch of records names (the bench's
	// writes make theirs due, and its interval lets each be worked again at once)
	// outlasts the measured run at load and shows none. Smaller passes make their rows
	// show.
	{name: "usage_fold", enable: func(w *config.Workers) { busyPass(&w.UsageFold); w.UsageFold.Batch = 20 }},
	{name: "recalibration", enable: func(w *config.Workers) { busyPass(&w.Recalibration); w.Recalibration.Batch = 1 }},
	{name: "entity_communities", enable: func(w *config.Workers) { busyPass(&w.Communities); w.Communities.Batch = 1 }},
	{name: "embedding_worker", enable: func(w *config.Workers) { busyPass(&w.Embedding) }},
	{name: "sensitivity_sweep", enable: func(w *config.Workers) { busyPass(&w.SensitivitySweep) }},
	{name: "audit_checkpoints", enable: func(w *config.Workers) { w.Audit.Interval = passInterval }},
	{name: "session_digest", enable: func(w *config.Workers) {
		w.SessionDigest.Enabled, w.SessionDigest.Interval, w.SessionDigest.MinTurns = true, passInterval, passDigestTurns
	}},
	// Every memory.set of the bench names no entity, so the extractor owes each one a
	// model call and an amendment.
	// The model passes take passModelBatch rows a pass, so their rows show inside a run.
	{name: "entity_extractor", enable: func(w *config.Workers) {
		w.Entities.Enabled, w.Entities.Interval, w.Entities.Batch = true, passInterval, passModelBatch
	}},
	{name: "structured_profile", enable: func(w *config.Workers) {
		w.Profiles.Enabled, w.Profiles.Interval, w.Profiles.Batch = true, passInterval, passModelBatch
	}},
	{name: "profile_consolidation", enable: func(w *config.Workers) {
		busyPass(&w.ProfileConsolidation.Pass)
		w.ProfileConsolidation.Batch = passModelBatch
	}},
	{name: "reflection_distill", enable: func(w *config.Workers) {
		busyPass(&w.ReflectionDistill.Pass)
		w.ReflectionDistill.Idle, w.ReflectionDistill.Batch = time.Second, passModelBatch
	}},
}

func busyPass(p *config.Pass) { p.Enabled, p.Interval = true, passInterval }

// passCases are the single-pass cases named (every one when names is empty), then the
// case with every pass at once: "every pass above" when each single pass was measured,
// "every pass" when only some were.
func passCases(names []string) ([]passCase, error) {
	all := passCase{name: "every pass above", enable: func(w *config.Workers) {
		for _, c := range busyPasses {
			c.enable(w)
		}
	}}
	if len(names) == 0 {
		return append(append([]passCase{}, busyPasses...), all), nil
	}
	var out []passCase
	for _, name := range names {
		i := slices.IndexFunc(busyPasses, func(c passCase) bool { return c.name == name })
		if i < 0 {
			known := make([]string, len(busyPasses))
			for j, c := range busyPasses {
				known[j] = c.name
			}
			return nil, fmt.Errorf("the passes scenario has no pass %q (it has %s)", name, strings.Join(known, ", "))
		}
		out = append(out, busyPasses[i])
	}
	all.name = "every pass"
	return append(out, all), nil
}

// passes measures memory.set's and memory.search's latency while each background pass
// runs continuously in a second process on the same stores, then all of them at once,
// against both with that process running no pass, in the same run (issue 32's target:
// within 1.2×); a second run with none closes the scenario, so the drift of a shared
// machine shows beside the ratios. Every side, the baseline's too, serves the same
// paced feed beside the writes (touches, observed sessions, users' preferences: what
// gives the passes work), so a ratio is the passes' cost alone. The process under test
// runs its own passes at their configured cadence on both sides (the notes name the
// ones on): run the bench with them off (LOOM_USAGE_FOLD_ENABLED=false, ...) for a
// baseline with none at all.
func (r *runner) passes(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title:    "memory.set and memory.search with the background passes running",
		Baseline: "the same calls with the second process running no pass, at the same concurrency, beside the same feed: the mean of the side just before the case and the side just after it",
		Notes: []string{"the passes run in a second process (the workers role alone) of this bench, on the same stores, each started " + passInterval.String() +
			" after the last ended, paced by the process's LOOM_WORKERS_PASS_* (" + r.pacing() + "); every side serves the same paced feed: " + passFeedNote},
	}
	res.Notes = append(res.Notes, r.ownPasses())
	f, cleanup, err := r.passFeedSetup(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	cases, err := passCases(r.opts.Passes)
	if err != nil {
		return nil, err
	}
	for _, conc := range r.levels(8) {
		f.conc = conc
		if err := r.passLevel(ctx, res, f, cases); err != nil {
			return nil, err
		}
	}
	if err := r.consolidationCalls(ctx, res, f); err != nil {
		return nil, err
	}
	return res, nil
}

// passLevel measures every case at f's concurrency, each between two sides with no
// pass (the one before it and the one after, which the next case shares): on a shared
// machine whose load moves by the minute, a case's baseline is the mean of the two
// measured next to it, not one measured minutes before.
func (r *runner) passLevel(ctx context.Context, res *ScenarioResult, f passFeed, cases []passCase) error {
	level := fmt.Sprintf("concurrency=%d", f.conc)
	before, err := r.withPasses(ctx, noPass, f, level)
	if err != nil {
		return err
	}
	first := before
	first.rows(res, level+", no pass (first)", nil)
	for _, c := range cases {
		busy, err := r.withPasses(ctx, c, f, level)
		if err != nil {
			return err
		}
		after, err := r.withPasses(ctx, noPass, f, level)
		if err != nil {
			return err
		}
		base := before.mean(after)
		busy.rows(res, level+", "+c.name, &base)
		before = after
	}
	before.rows(res, level+", no pass (last) against the first: the run's drift", &first)
	return nil
}

// pacing names the passes' pacing the second process runs with.
func (r *runner) pacing() string {
	p := r.t.Process.Cfg.Workers.Pacing
	return fmt.Sprintf("%d pass at a time, a rest of %g× each pass's time after it", p.Concurrency, p.RestRatio)
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
