package mcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

type turnArgs struct {
	Role    string `json:"role" jsonschema:"Who said it: 'user', 'assistant', 'system' or 'tool'."`
	Content string `json:"content" jsonschema:"What was said."`
	Speaker string `json:"speaker,omitempty" jsonschema:"The speaker's name, when it matters."`
	At      string `json:"at,omitempty" jsonschema:"When it was said, RFC 3339 (default now)."`
}

type logTurnsArgs struct {
	Namespace string     `json:"namespace" jsonschema:"The namespace whose conversation record keeps the turns."`
	Turns     []turnArgs `json:"turns" jsonschema:"The turns, oldest first."`
	identityArgs
}

func (a logTurnsArgs) request() (client.ObserveRequest, error) {
	req := client.ObserveRequest{Identity: a.identity()}
	for i, t := range a.Turns {
		at, err := parseTime(fmt.Sprintf("turns[%d].at", i), t.At)
		if err != nil {
			return req, err
		}
		turn := client.ObservedTurn{Role: t.Role, Content: t.Content, Speaker: t.Speaker}
		if !at.IsZero() {
			turn.At = &at
		}
		req.Turns = append(req.Turns, turn)
	}
	return req, nil
}

type recallArgs struct {
	Namespace string `json:"namespace" jsonschema:"The namespace to recall from."`
	Key       string `json:"key,omitempty" jsonschema:"A memory's key: recall the turns it was drawn from."`
	MemoryID  string `json:"memory_id,omitempty" jsonschema:"A memory's id: recall the turns it was drawn from."`
	Query     string `json:"query,omitempty" jsonschema:"A question: recall the turns that answer it."`
	identityArgs
	Window *int `json:"window,omitempty" jsonschema:"Turns of context either side of each hit (default 2, at most 20)."`
	TopK   *int `json:"top_k,omitempty" jsonschema:"How many turns a query recalls (default 5, at most 50)."`
}

// addConversationTools adds memory_log_turns, memory_recall and memory_crystallize.
func addConversationTools(s *sdk.Server, c *client.Client) {
	register(s, c, tool[logTurnsArgs]{
		name: "memory_log_turns", title: "Log conversation turns",
		description: "Keep turns of the conversation, as they happen, in Loom's record of it, without extracting " +
			"facts (use memory_set for those): memory_recall then finds what was said, when and in which session.",
		out: client.ObserveAnswer{},
		run: func(ctx context.Context, c *client.Client, in logTurnsArgs) (any, string, error) {
			req, err := in.request()
			if err != nil {
				return nil, "", err
			}
			a, err := c.Observe(ctx, in.Namespace, req)
			if err != nil {
				return nil, "", err
			}
			return a, fmt.Sprintf("%s: kept %d turns of session %s.", in.Namespace, len(a.Turns), a.SessionID), nil
		},
	})
	register(s, c, tool[recallArgs]{
		name: "memory_recall", title: "Recall what was said", readOnly: true,
		description: "Read the conversation's own words: with `key` or `memory_id`, the turns a memory was drawn from; " +
			"with `query`, the turns that answer it, best first. Each hit carries its session, time and the turns around " +
			"it (`window`). Give exactly one of key, memory_id and query.",
		out: client.RecallAnswer{},
		run: func(ctx context.Context, c *client.Client, in recallArgs) (any, string, error) {
			a, err := c.Recall(ctx, in.Namespace, client.RecallRequest{Key: in.Key, MemoryID: in.MemoryID, Query: in.Query,
				Identity: in.identity(), Window: in.Window, TopK: in.TopK})
			if err != nil {
				return nil, "", err
			}
			return a, recallSummary(in.Namespace, a), nil
		},
	})
	addCrystallizeTool(s, c)
}

func recallSummary(ns string, a *client.RecallAnswer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d turns recalled", ns, len(a.Hits))
	for _, h := range a.Hits {
		fmt.Fprintf(&b, "\n- [session %s, #%d, %s] %s: %s", h.SessionID, h.MessageIndex, h.OccurredAt.Format("2006-01-02 15:04"),
			h.Role, clip(h.Text, 200))
	}
	return b.String()
}
