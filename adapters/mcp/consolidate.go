package mcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

// The memory's upkeep: profile_schema_set (profile_schema.set), memory_consolidate
// (memory.consolidate) and memory_consolidate_undo (its undo). Each needs an admin
// token, as REST does; REST refuses what a token bound to one user may not do.

type profileSchemaArgs struct {
	Namespace string         `json:"namespace" jsonschema:"The namespace whose users' structured profiles the schema holds."`
	Schema    map[string]any `json:"schema" jsonschema:"A JSON Schema of an object, in strict structured output's subset: every object sets additionalProperties false and lists all its properties in required (a field that may be unknown is nullable, as type [string, null]). At most 32 KiB."`
}

func (a profileSchemaArgs) check() error {
	if a.Schema == nil {
		return &argError{"schema", "schema is required: a JSON Schema object"}
	}
	return nil
}

type consolidateArgs struct {
	Namespace     string   `json:"namespace" jsonschema:"The namespace whose memories to consolidate."`
	UserID        string   `json:"user_id,omitempty" jsonschema:"Consolidate this user's memories alone. Leave out for every user's (a token bound to one user must name its user)."`
	DryRun        bool     `json:"dry_run,omitempty" jsonschema:"Answer the clusters that would be merged, writing nothing and calling no model."`
	MinSimilarity *float64 `json:"min_similarity,omitempty" jsonschema:"The cosine two memories need to be in one cluster, in (0, 1]. Leave out for the deployment's default."`
	MaxClusters   *int     `json:"max_clusters,omitempty" jsonschema:"Merge at most this many clusters (one model call each). Leave out for the deployment's default."`
}

type consolidateUndoArgs struct {
	Namespace string `json:"namespace" jsonschema:"The namespace the run consolidated."`
	RunID     string `json:"run_id" jsonschema:"The run_id memory_consolidate answered."`
}

func (a consolidateUndoArgs) check() error {
	if a.RunID == "" {
		return &argError{"run_id", "run_id is required"}
	}
	return nil
}

// addUpkeepTools registers profile_schema_set, memory_consolidate and
// memory_consolidate_undo.
func addUpkeepTools(s *sdk.Server, c *client.Client) {
	register(s, c, tool[profileSchemaArgs]{
		name: "profile_schema_set", title: "Set the profile schema",
		description: "Set the JSON Schema a namespace's structured user profiles are held to (it replaces the one before). " +
			"Loom then builds, for each user, one profile of that shape from the user's stored facts (one model call each), " +
			"and builds it again when a fact or the schema changes; memory_profile reads it. Needs an admin token not bound " +
			"to one user. A schema outside strict mode's subset is refused naming `schema`.",
		out: client.ProfileSchemaAnswer{},
		run: func(ctx context.Context, c *client.Client, in profileSchemaArgs) (any, string, error) {
			a, err := c.SetProfileSchema(ctx, in.Namespace, in.Schema)
			if err != nil {
				return nil, "", err
			}
			return a, fmt.Sprintf("%s: profile schema set (hash %s); profiles are built again to it.", a.Namespace, a.SchemaHash), nil
		},
	})
	register(s, c, tool[consolidateArgs]{
		name: "memory_consolidate", title: "Merge similar memories", destructive: true,
		description: "Find clusters of near-identical memories (one agent, user and type each) and merge each into one " +
			"summary memory written by a model (one call a cluster), which lists the merged memories in `derived_from`; " +
			"the merged keys are deleted. With dry_run, answer the clusters and change nothing. The run is logged: " +
			"memory_consolidate_undo with its `run_id` restores every merged memory. Needs an admin token.",
		out: client.ConsolidateAnswer{},
		run: func(ctx context.Context, c *client.Client, in consolidateArgs) (any, string, error) {
			a, err := c.Consolidate(ctx, in.Namespace, client.ConsolidateRequest{UserID: in.UserID, DryRun: in.DryRun,
				MinSimilarity: in.MinSimilarity, MaxClusters: in.MaxClusters})
			if err != nil {
				return nil, "", err
			}
			return a, consolidateSummary(in.Namespace, a), nil
		},
	})
	register(s, c, tool[consolidateUndoArgs]{
		name: "memory_consolidate_undo", title: "Undo a consolidation", destructive: true,
		description: "Undo a memory_consolidate run: every merged memory not written since is restored as it was, and the " +
			"run's summaries are deleted. A run is undone once; a second undo is refused (PRECONDITION_FAILED).",
		out: client.ConsolidationUndoAnswer{},
		run: func(ctx context.Context, c *client.Client, in consolidateUndoArgs) (any, string, error) {
			a, err := c.UndoConsolidation(ctx, in.Namespace, in.RunID)
			if err != nil {
				return nil, "", err
			}
			sum := fmt.Sprintf("%s: run %s undone: %d memories restored, %d summaries deleted", in.Namespace, a.RunID, a.Restored, a.Retired)
			if len(a.Left) > 0 {
				sum += fmt.Sprintf(", %d left as they are (written, erased or redacted since)", len(a.Left))
			}
			return a, sum + ".", nil
		},
	})
}

func consolidateSummary(ns string, a *client.ConsolidateAnswer) string {
	var b strings.Builder
	if a.DryRun {
		fmt.Fprintf(&b, "%s: dry run over %d memories, nothing written: %d clusters would be merged", ns, a.Candidates, len(a.Clusters))
	} else {
		fmt.Fprintf(&b, "%s: run %s over %d memories: %d merged into %d summaries with %d model calls", ns, a.RunID, a.Candidates,
			a.MergedRows, len(a.Clusters)-len(a.Failures), a.ModelCalls)
	}
	for i, cl := range a.Clusters {
		if i == 5 {
			fmt.Fprintf(&b, "\n… %d more clusters", len(a.Clusters)-i)
			break
		}
		keys := make([]string, len(cl.Members))
		for j, m := range cl.Members {
			keys[j] = m.MemoryKey
		}
		fmt.Fprintf(&b, "\n- %s: %s", cl.Status, strings.Join(keys, ", "))
		if cl.Summary != nil {
			fmt.Fprintf(&b, " → %s", cl.Summary.MemoryKey)
		}
	}
	for _, f := range a.Failures {
		fmt.Fprintf(&b, "\n- cluster %d not merged: %s", f.Cluster, f.Reason)
	}
	if !a.DryRun && a.RunID != "" {
		b.WriteString("\nUndo with memory_consolidate_undo, run_id " + a.RunID + ".")
	}
	return b.String()
}
