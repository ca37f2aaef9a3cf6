package mcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

// memory_learnings: the learnings queue (learnings.list), the rules about the agent
// itself that memory_from_messages filed for review instead of writing them as
// memories, each with the users' quotes that support it.

type learningsArgs struct {
	Namespace string `json:"namespace" jsonschema:"The namespace whose learnings queue to read."`
	Agent     string `json:"agent,omitempty" jsonschema:"Only the rules said to this agent (default every agent's)."`
	Limit     int    `json:"limit,omitempty" jsonschema:"At most this many rules, newest first (1 to 500, default 100)."`
}

// addLearningsTools registers memory_learnings.
func addLearningsTools(s *sdk.Server, c *client.Client) {
	register(s, c, tool[learningsArgs]{
		name: "memory_learnings", title: "Rules users taught you", readOnly: true,
		description: "List the rules about you, the agent (\"always answer in French\"), that conversations given to " +
			"memory_from_messages held: they are filed for review, never written as memories, each with the users' quotes " +
			"that support it, newest first. Needs a token that writes; a token bound to one user lists only that user's.",
		out: client.LearningsAnswer{},
		run: func(ctx context.Context, c *client.Client, in learningsArgs) (any, string, error) {
			a, err := c.Learnings(ctx, in.Namespace, client.LearningsOptions{Agent: in.Agent, Limit: in.Limit})
			if err != nil {
				return nil, "", err
			}
			return a, learningsSummary(in.Namespace, a), nil
		},
	})
}

func learningsSummary(ns string, a *client.LearningsAnswer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d rules about the agent filed for review", ns, len(a.Learnings))
	for _, l := range a.Learnings {
		fmt.Fprintf(&b, "\n- [%s, %s, %d supporters] %s", l.Status, l.Agent, len(l.Supporters), clip(l.Rule, 200))
	}
	return b.String()
}
