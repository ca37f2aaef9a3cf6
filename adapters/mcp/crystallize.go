package mcp

import (
	"context"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

type crystallizeArgs struct {
	Namespace string `json:"namespace" jsonschema:"The namespace whose conversation record holds the session's logged turns."`
	identityArgs
	Tags   []string `json:"tags,omitempty" jsonschema:"Tags every fact written gets."`
	DryRun bool     `json:"dry_run,omitempty" jsonschema:"Extract and judge, but write nothing."`
}

// addCrystallizeTool adds memory_crystallize (observe.crystallize).
func addCrystallizeTool(s *sdk.Server, c *client.Client) {
	register(s, c, tool[crystallizeArgs]{
		name: "memory_crystallize", title: "Turn logged turns into facts",
		description: "Extract the durable facts of a session's turns logged with memory_log_turns and not read by an " +
			"earlier crystallize, and write them, each judged as any write and linked to the turn it came from " +
			"(memory_recall by the fact finds it). Call it when a session ends, or when you want its facts now. Needs " +
			"Loom's model provider.",
		out: client.CrystallizeAnswer{},
		run: func(ctx context.Context, c *client.Client, in crystallizeArgs) (any, string, error) {
			a, err := c.Crystallize(ctx, in.Namespace, client.CrystallizeRequest{Identity: in.identity(), Tags: in.Tags, DryRun: in.DryRun})
			if err != nil {
				return nil, "", err
			}
			written := 0
			for _, f := range a.Facts {
				if f.MemoryID != "" {
					written++
				}
			}
			sum := fmt.Sprintf("%s: read %d logged turns of session %s; %d facts extracted, %d written or revised.",
				in.Namespace, a.Crystallized, a.SessionID, len(a.Facts), written)
			if a.More {
				sum += " More turns are left: call again."
			}
			return a, sum, nil
		},
	})
}
