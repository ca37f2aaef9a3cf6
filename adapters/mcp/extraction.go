package mcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

type messageArgs struct {
	Role    string `json:"role" jsonschema:"Who said it: 'user', 'assistant', 'system' or 'tool'."`
	Content string `json:"content" jsonschema:"What was said."`
	At      string `json:"at,omitempty" jsonschema:"When it was said, RFC 3339: the facts it states are valid from then."`
}

type fromMessagesArgs struct {
	Namespace string        `json:"namespace" jsonschema:"The namespace to write the facts to."`
	Messages  []messageArgs `json:"messages" jsonschema:"The conversation, oldest first."`
	identityArgs
	MemoryType   string   `json:"memory_type,omitempty" jsonschema:"The kind of memory every fact is written as (default 'fact')."`
	Tags         []string `json:"tags,omitempty" jsonschema:"Labels added to every fact."`
	RecalledKeys []string `json:"recalled_keys,omitempty" jsonschema:"Keys of the memories this session was shown: a fact that only repeats one is dropped."`
	DryRun       bool     `json:"dry_run,omitempty" jsonschema:"Extract and judge the facts and answer what would be written, writing nothing."`
	Defer        *bool    `json:"defer,omitempty" jsonschema:"true: queue the conversation and answer a queue_id at once; a worker extracts it later."`
}

func (a fromMessagesArgs) request() (client.FromMessagesRequest, error) {
	req := client.FromMessagesRequest{Identity: a.identity(), MemoryType: a.MemoryType, Tags: a.Tags,
		RecalledKeys: a.RecalledKeys, DryRun: a.DryRun, Defer: a.Defer}
	for i, m := range a.Messages {
		at, err := parseTime(fmt.Sprintf("messages[%d].at", i), m.At)
		if err != nil {
			return req, err
		}
		msg := client.Message{Role: m.Role, Content: m.Content}
		if !at.IsZero() {
			msg.At = &at
		}
		req.Messages = append(req.Messages, msg)
	}
	return req, nil
}

// addExtractionTools adds memory_from_messages.
func addExtractionTools(s *sdk.Server, c *client.Client) {
	register(s, c, tool[fromMessagesArgs]{
		name: "memory_from_messages", title: "Remember a conversation",
		description: "Have Loom extract the durable facts of a conversation and write them, each under a key naming its " +
			"subject and attribute (user.home_city), so a later statement of the same attribute revises it. Every fact " +
			"is judged like memory_set's writes: the answer lists each fact with its key, `verdict` and the message it " +
			"came from; echoes of what you were shown, narration and duplicates are dropped; \"forget this\" in the " +
			"conversation retires the matching memories. Needs a model provider on the server (LLM_NOT_CONFIGURED " +
			"otherwise); past the namespace's daily model budget it is DAILY_COST_CAP_REACHED.",
		out: client.FromMessagesAnswer{},
		run: func(ctx context.Context, c *client.Client, in fromMessagesArgs) (any, string, error) {
			req, err := in.request()
			if err != nil {
				return nil, "", err
			}
			a, err := c.FromMessages(ctx, in.Namespace, req)
			if err != nil {
				return nil, "", err
			}
			return a, fromMessagesSummary(in.Namespace, a), nil
		},
	})
}

func fromMessagesSummary(ns string, a *client.FromMessagesAnswer) string {
	if a.Deferred {
		return fmt.Sprintf("%s: queued for extraction as %s (status %s); nothing written yet.", ns, a.QueueID, a.Status)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d facts", ns, len(a.Facts))
	if a.DryRun {
		b.WriteString(" (dry run, nothing written)")
	}
	b.WriteString(":")
	for _, f := range a.Facts {
		fmt.Fprintf(&b, "\n- %s = %s: %s (message %d)", f.Key, clip(f.Value, 120), f.Verdict, f.MessageIndex)
		if f.DroppedBy != "" {
			fmt.Fprintf(&b, ", dropped by %s", f.DroppedBy)
		}
	}
	for _, g := range a.Forgotten {
		if g.Retired {
			fmt.Fprintf(&b, "\n- forgot %s", g.Key)
		}
	}
	return b.String()
}
