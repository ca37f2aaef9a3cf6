package bench

import (
	"context"
	"fmt"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
)

// passClusters are memory.consolidate's clusters in the passes scenario: each a user's
// three restatements of one fact, which the scripted model merges with one call.
var passClusters = [][]string{
	{"drinks dark roast coffee every morning", "drinks dark roast coffee each morning at home", "every morning drinks a dark roast coffee"},
	{"walks the dog along the river after work", "after work walks the dog along the river", "walks the dog by the river after work each day"},
	{"reads a chapter of a novel before sleeping", "before sleeping reads a chapter of a novel", "reads a novel chapter each night before sleeping"},
}

// consolidationCalls runs memory.consolidate once over passClusters in a process that
// serves the write routes with the scripted provider (the process under test keeps its
// own configuration) and reports its model calls per merged row (issue 32).
func (r *runner) consolidationCalls(ctx context.Context, res *ScenarioResult, f passFeed) error {
	cfg := r.t.Process.Cfg
	cfg.Roles = config.Roles{config.RoleCommand, config.RoleQuery}
	cfg.Boot.Migrate = false
	cfg.LLM.BaseURL, cfg.LLM.Model = f.model.URL, ScriptedModel
	cfg.Workers = quietWorkers(cfg.Workers, noPass)
	url, stop, err := r.t.OpenPeer(ctx, cfg, nil)
	if err != nil {
		return fmt.Errorf("open the consolidating process: %w", err)
	}
	defer stop()
	api, err := newClient(url, r.t.Token)
	if err != nil {
		return err
	}
	ns := r.namespace("passes", "consolidate")
	if err := r.appendOnly(ctx, ns); err != nil {
		return err
	}
	for c, cluster := range passClusters {
		for i, v := range cluster {
			user := fmt.Sprintf("user-%d", c)
			if _, err := api.Set(ctx, ns, fmt.Sprintf("c%d-%d", c, i), client.SetRequest{Identity: client.Identity{UserID: user}, Value: "The user " + v}); err != nil {
				return fmt.Errorf("write the clusters: %w", err)
			}
		}
	}
	if err := r.waitProjected(ctx, ns); err != nil {
		return err
	}
	calls := f.model.calls()
	minSim := 0.7
	ans, err := api.Consolidate(ctx, ns, client.ConsolidateRequest{MinSimilarity: &minSim})
	if err != nil {
		return fmt.Errorf("memory.consolidate: %w", err)
	}
	res.Rows = append(res.Rows, plainRow("memory.consolidate", "model calls per merged row", round(ans.ModelCallsPerMergedRow, 3)),
		plainRow("memory.consolidate", "merged rows", float64(ans.MergedRows)), plainRow("memory.consolidate", "model calls", float64(ans.ModelCalls)))
	res.Notes = append(res.Notes, fmt.Sprintf("memory.consolidate over %d clusters of 3 restatements (min_similarity %g): %d clusters, %d merged rows, %d model calls (%d seen by the scripted provider), %d failures",
		len(passClusters), minSim, len(ans.Clusters), ans.MergedRows, ans.ModelCalls, f.model.calls()-calls, len(ans.Failures)))
	return nil
}
