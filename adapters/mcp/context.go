package mcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

type contextArgs struct {
	Namespace    string   `json:"namespace" jsonschema:"The namespace to pack from."`
	Query        string   `json:"query,omitempty" jsonschema:"What the next answer is about (usually the user's message): the facts layer searches for it."`
	UserID       string   `json:"user_id,omitempty" jsonschema:"The user the context is about."`
	Agent        string   `json:"agent,omitempty" jsonschema:"Only this agent's memories."`
	SessionID    string   `json:"session_id,omitempty" jsonschema:"The conversation in progress: its digest and last turns."`
	BudgetTokens int      `json:"budget_tokens,omitempty" jsonschema:"How many tokens the block may hold (16 to 200000; default 2000)."`
	Model        string   `json:"model,omitempty" jsonschema:"The model the block is for, whose tokenizer counts the budget (e.g. gpt-4o; Claude, Llama, Gemini are counted approximately)."`
	Sections     []string `json:"sections,omitempty" jsonschema:"Only these layers: profile, facts, recent, session, knowledge."`
}

type timelineArgs struct {
	Namespace string `json:"namespace" jsonschema:"The namespace."`
	Key       string `json:"key,omitempty" jsonschema:"One key's timeline (with agent, user_id, session_id naming it)."`
	Entity    string `json:"entity,omitempty" jsonschema:"A subject's timeline: the facts naming this entity."`
	identityArgs
	Limit int `json:"limit,omitempty" jsonschema:"At most this many keys (default 20)."`
}

// addContextTools registers memory_context (context.pack) and memory_timeline.
func addContextTools(s *sdk.Server, c *client.Client) {
	register(s, c, tool[contextArgs]{
		name: "memory_context", title: "Context for the next answer", readOnly: true,
		description: "One call before answering: a block for the system prompt with what Loom knows that matters now: the user's " +
			"profile, the facts relevant to `query`, what changed recently and the session so far, cut to `budget_tokens`. " +
			"Each line cites its source ([m:<memory_id>@<version>] a memory version, [t:<id>] a turn); `cut` says what did not fit and why.",
		out: client.PackAnswer{},
		run: func(ctx context.Context, c *client.Client, in contextArgs) (any, string, error) {
			req := client.PackRequest{Query: in.Query, UserID: in.UserID, Agent: in.Agent, SessionID: in.SessionID, Model: in.Model, Sections: in.Sections}
			if in.BudgetTokens != 0 {
				req.BudgetTokens = &in.BudgetTokens
			}
			a, err := c.Pack(ctx, in.Namespace, req)
			if err != nil {
				return nil, "", err
			}
			return a, packSummary(a), nil
		},
	})
	register(s, c, tool[timelineArgs]{
		name: "memory_timeline", title: "How facts changed over time", readOnly: true,
		description: "A key's or a subject's facts and their changes in the order they held true (valid time), with what superseded what. " +
			"Name a key, or an entity, or neither for the newest facts.",
		out: client.TimelineAnswer{},
		run: func(ctx context.Context, c *client.Client, in timelineArgs) (any, string, error) {
			a, err := c.Timeline(ctx, in.Namespace, client.TimelineQuery{Identity: in.identity(), Key: in.Key, Entity: in.Entity, Limit: in.Limit})
			if err != nil {
				return nil, "", err
			}
			return a, timelineSummary(a), nil
		},
	})
}

// packSummary is the block itself, and a line on what was left out.
func packSummary(a *client.PackAnswer) string {
	var b strings.Builder
	b.WriteString(a.Block)
	if a.Block == "" {
		b.WriteString("Nothing to pack.")
	}
	fmt.Fprintf(&b, "\n(%d of %d tokens, %s", a.Tokens, a.Budget, a.Tokenizer.Encoding)
	if len(a.Cut) > 0 {
		fmt.Fprintf(&b, "; %d lines cut", len(a.Cut))
	}
	b.WriteString(")")
	return b.String()
}

func timelineSummary(a *client.TimelineAnswer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d versions of %d keys in %s, in valid time:", len(a.Entries), a.Keys, a.Namespace)
	for _, e := range a.Entries {
		fmt.Fprintf(&b, "\n- %s %s %s: %s", e.ValidFrom.Format("2006-01-02T15:04:05Z07:00"), e.MemoryKey, e.Event, clip(string(e.Value), 120))
		if e.SupersededBy != "" {
			fmt.Fprintf(&b, " (superseded by %s)", e.SupersededBy)
		}
	}
	return b.String()
}
