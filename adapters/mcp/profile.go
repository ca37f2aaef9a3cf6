package mcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

// memory_profile: a user's structured profile (profile.render), the text an agent puts
// in its prompt, with the row and version it came from; profile_structured: the same
// profile as the JSON object its schema holds (profile.structured), for an agent that
// reads fields rather than text.

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

type structuredProfileArgs struct {
	Namespace string `json:"namespace" jsonschema:"The namespace whose profile schema the profile follows."`
	UserID    string `json:"user_id" jsonschema:"The user whose profile to read."`
}

func (a structuredProfileArgs) check() error {
	if a.UserID == "" {
		return fmt.Errorf("user_id is required")
	}
	return nil
}

// addProfileTools registers memory_profile and profile_structured.
func addProfileTools(s *sdk.Server, c *client.Client) {
	register(s, c, tool[structuredProfileArgs]{
		name: "profile_structured", title: "A user's structured profile", readOnly: true,
		description: "Read a user's profile as the JSON object the namespace's profile schema holds (profile.structured): " +
			"every field of the schema, null when the user's stored facts do not say, with the profile row's version, the " +
			"schema hash it was built to and `stale` when a fact changed since. RESOURCE_NOT_FOUND when none was built for the user yet.",
		out: client.Profile{},
		run: func(ctx context.Context, c *client.Client, in structuredProfileArgs) (any, string, error) {
			a, err := c.Profile(ctx, in.Namespace, in.UserID)
			if err != nil {
				return nil, "", err
			}
			summary := fmt.Sprintf("%s's profile (%s, version %s, from %d facts): %s", a.UserID, a.MemoryKey, a.VersionText, a.Sources, a.Profile)
			if a.Stale {
				summary += "\n(stale: a fact changed since; it is being built again)"
			}
			return a, summary, nil
		},
	})
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
