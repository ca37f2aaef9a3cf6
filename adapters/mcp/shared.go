package mcp

import (
	"context"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

// The shared-scope and decision tools: memory_promote and decision_record.

type promoteArgs struct {
	keyArgs
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"Any unique string: sending the same call again with it never promotes twice."`
}

type decisionArgs struct {
	Namespace      string   `json:"namespace" jsonschema:"The namespace, a name such as 'platform' (letters, digits, '.', '_', '-')."`
	Key            string   `json:"key" jsonschema:"The decision's key: a short stable name for what was decided, such as 'ledger-database'."`
	Decision       string   `json:"decision" jsonschema:"What was decided, in one sentence."`
	Rationale      string   `json:"rationale,omitempty" jsonschema:"Why it was decided."`
	DecidedBy      string   `json:"decided_by" jsonschema:"Who decided: a person, a team or a meeting."`
	Supersedes     []string `json:"supersedes,omitempty" jsonschema:"The keys of earlier decisions this one replaces."`
	IdempotencyKey string   `json:"idempotency_key,omitempty" jsonschema:"Any unique string: sending the same call again with it never records twice."`
	identityArgs
}

// addSharedTools registers memory_promote and decision_record.
func addSharedTools(s *sdk.Server, c *client.Client) {
	register(s, c, tool[promoteArgs]{
		name: "memory_promote", title: "Share a memory with everyone",
		description: "Promote one of your memories (a key, for an agent, user and session) to the namespace's shared scope, " +
			"for a fact that holds for every user (\"the staging database moved to eu-west-2\"): every user's search of the " +
			"namespace then finds it, with `shared` saying who promoted it and from which memory and version. Promoting the " +
			"same value again writes nothing (`written` false).",
		out: client.SharedAnswer{},
		run: func(ctx context.Context, c *client.Client, in promoteArgs) (any, string, error) {
			if err := in.check(); err != nil {
				return nil, "", err
			}
			a, err := c.Promote(ctx, in.Namespace, in.Key, in.identity(), idempotency(in.IdempotencyKey)...)
			if err != nil {
				return nil, "", err
			}
			what := "promoted"
			if !a.Written {
				what = "already shared"
			}
			return a, fmt.Sprintf("%s/%s: %s (shared row version %s); every user's search finds it.", in.Namespace, a.MemoryKey, what, a.VersionText), nil
		},
	})
	register(s, c, tool[decisionArgs]{
		name: "decision_record", title: "Record a decision",
		description: "Record a decision: what was decided, why, by whom, and which earlier decisions (by key) it replaces. " +
			"It is kept as a decision memory under the key, with its record; deleting the decision later retires the record.",
		out: client.DecisionAnswer{},
		run: func(ctx context.Context, c *client.Client, in decisionArgs) (any, string, error) {
			a, err := c.RecordDecision(ctx, in.Namespace, client.DecisionRequest{Key: in.Key, Decision: in.Decision, Rationale: in.Rationale,
				DecidedBy: in.DecidedBy, Supersedes: in.Supersedes, Agent: in.Agent, UserID: in.UserID, SessionID: in.SessionID},
				idempotency(in.IdempotencyKey)...)
			if err != nil {
				return nil, "", err
			}
			return a, fmt.Sprintf("%s/%s: decision recorded (version %s, verdict %s), decided by %s.", in.Namespace, a.MemoryKey, a.VersionText,
				a.Verdict, a.Record.DecidedBy), nil
		},
	})
}
