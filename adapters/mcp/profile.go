package mcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

// memory_profile: a user's structured profile (profile.render), the text an agent puts
// in its prompt, with the row and version it came from.

type profileArgs struct {
	Namespace string `json:"namespace" jsonschema:"The namespace whose profile schema the profile follows."`
	UserID    string `json:"user_id" jsonschema:"The user whose profile to read."`
	Format    string `json:"format,omitempty" jsonschema:"markdown (the default) or text."`
}

func (a profileArgs) check() error {
	if a.UserID == "" {
		return fmt.Errorf("user_id is required")
	}
	if a.Format != "" && a.Format != "markdown" && a.Format != "text" {
		return fmt.Errorf(`format is "markdown" or "text"`)
	}
	return nil
}

// addProfileTools registers memory_profile.
func addProfileTools(s *sdk.Server, c *client.Client) {
	register(s, c, tool[profileArgs]{
		name: "memory_profile", title: "A user's profile", readOnly: true,
		description: "Read what Loom knows about a user as one profile, built from their stored facts and held to the " +
			"namespace's profile schema, rendered for a prompt, followed (in a namespace that opts in to profile sections) by " +
			"the user's standing preferences and decisions. RESOURCE_NOT_FOUND when neither was built for the user yet.",
		out: client.RenderedProfile{},
		run: func(ctx context.Context, c *client.Client, in profileArgs) (any, string, error) {
			a, err := c.RenderProfile(ctx, in.Namespace, in.UserID, in.Format)
			if err != nil {
				return nil, "", err
			}
			cites := a.Citation
			if len(a.Citations) > 0 {
				cites = strings.Join(a.Citations, ", ")
			}
			return a, a.Text + "\n(" + cites + ")", nil
		},
	})
}
