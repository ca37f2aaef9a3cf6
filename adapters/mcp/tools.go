package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

// tool is one tool: its definition and what it does with its arguments.
type tool[In any] struct {
	name, title, description string
	readOnly, destructive    bool
	out                      any // the answer's Go type, for its output schema
	run                      func(ctx context.Context, c *client.Client, in In) (answer any, summary string, err error)
}

// addTools registers every tool on s, each calling Loom through c.
func addTools(s *sdk.Server, c *client.Client) {
	addWriteTools(s, c)
	addSearchTools(s, c)
	addReadTools(s, c)
	addExtractionTools(s, c)
	addKnowledgeTools(s, c)
	addProfileTools(s, c) // profile.go
	addUpkeepTools(s, c)  // consolidate.go
	addContextTools(s, c)
	addConversationTools(s, c)
	addSharedTools(s, c)
	addLearningsTools(s, c) // learnings.go
}

// addWriteTools registers the tools that write one key: memory_set and memory_delete.
func addWriteTools(s *sdk.Server, c *client.Client) {
	register(s, c, tool[setArgs]{
		name: "memory_set", title: "Remember something",
		description: "Write a memory: a value under a key in a namespace, for an agent, user and session. " +
			"Loom keeps every version and judges the write against what it already holds: the answer's `verdict` says " +
			"whether it was new, a restatement (the same value again, reinforced), a merge (another memory already holds " +
			"it: nothing written), a duplicate, a refinement (it retires an older memory) or a conflict; `written` says " +
			"whether a version was committed. Refusals come back as errors with a code (PINNED_CONFLICT, MEMORY_LOCKED, " +
			"VALIDATION_FAILED, ...).",
		out: client.SetAnswer{},
		run: func(ctx context.Context, c *client.Client, in setArgs) (any, string, error) {
			req, err := in.request()
			if err != nil {
				return nil, "", err
			}
			a, err := c.Set(ctx, in.Namespace, in.Key, req, idempotency(in.IdempotencyKey)...)
			if err != nil {
				return nil, "", err
			}
			return a, setSummary(in.Namespace, a), nil
		},
	})
	register(s, c, tool[deleteArgs]{
		name: "memory_delete", title: "Forget a memory", destructive: true,
		description: "Delete one key's memory (for an agent, user and session). Its history is kept and it can be " +
			"restored. With `version`, only while the key still holds the version you read: when it has moved on " +
			"nothing is deleted and the answer says `version_changed`.",
		out: client.CopyAnswer{},
		run: func(ctx context.Context, c *client.Client, in deleteArgs) (any, string, error) {
			a, err := c.Delete(ctx, in.Namespace, in.Key, in.identity(), in.Version, idempotency(in.IdempotencyKey)...)
			if err != nil {
				return nil, "", err
			}
			return a, deleteSummary(in.Namespace, a), nil
		},
	})
	register(s, c, tool[keyArgs]{
		name: "memory_touch", title: "Mark a memory as used",
		description: "Record that you used a memory (you acted on it, or the user confirmed it). Nothing is rewritten: " +
			"each touch adds one to the memory's reinforcement within seconds, which ranks it above equally relevant " +
			"memories in later searches.",
		out: client.TouchAnswer{},
		run: func(ctx context.Context, c *client.Client, in keyArgs) (any, string, error) {
			a, err := c.Touch(ctx, in.Namespace, in.Key, in.identity())
			if err != nil {
				return nil, "", err
			}
			return a, fmt.Sprintf("Marked %s/%s as used.", in.Namespace, in.Key), nil
		},
	})
}

// addSearchTools registers the tools that look through a namespace: memory_search and
// memory_ask.
func addSearchTools(s *sdk.Server, c *client.Client) {
	register(s, c, tool[searchArgs]{
		name: "memory_search", title: "Search memories", readOnly: true,
		description: "Search a namespace's memories by meaning and words, best first. Every write that answered before " +
			"the search is searched. Check `verdict` before using the hits: `ok` means the best hit is relevant; " +
			"`no_match` that nothing matched, `below_threshold` that no hit is relevant enough, " +
			"`low_calibrated_confidence` that the best hit is no better than the near misses, `ungrounded_identifier` " +
			"that no hit holds a name, code or number the query names: in each case answer that you do not know rather " +
			"than use them. `retrieval_risk` scores the same from 0 to 1. Each hit carries `score` and `scores` " +
			"(vector, lexical, key, relevance).",
		out: client.SearchAnswer{},
		run: func(ctx context.Context, c *client.Client, in searchArgs) (any, string, error) {
			req, err := in.request()
			if err != nil {
				return nil, "", err
			}
			a, err := c.Search(ctx, in.Namespace, req)
			if err != nil {
				return nil, "", err
			}
			return a, searchSummary(a), nil
		},
	})
	register(s, c, tool[askArgs]{
		name: "memory_ask", title: "Ask your memories", readOnly: true,
		description: "Answer a question from a namespace's memories only: Loom searches them, then a model answers from " +
			"what the search found and cites the memories it used (`citations`). When `abstained` is true, nothing stored " +
			"answers the question (`abstain_code` says why: no_match, below_threshold, pool_does_not_answer): say you do " +
			"not know rather than guess. Costs a model call against the namespace's daily budget.",
		out: client.AskAnswer{},
		run: func(ctx context.Context, c *client.Client, in askArgs) (any, string, error) {
			a, err := c.Ask(ctx, in.Namespace, in.request())
			if err != nil {
				return nil, "", err
			}
			return a, askSummary(a), nil
		},
	})
}

// addReadTools registers the tools that read keys: memory_get, memory_list and
// memory_history.
func addReadTools(s *sdk.Server, c *client.Client) {
	register(s, c, tool[getArgs]{
		name: "memory_get", title: "Read a memory", readOnly: true,
		description: "Read the current value of one key (for an agent, user and session), as soon as it was written; " +
			"with `as_of`, the value it held then. A key never written, deleted or expired is RESOURCE_NOT_FOUND.",
		out: client.Memory{},
		run: func(ctx context.Context, c *client.Client, in getArgs) (any, string, error) {
			asOf, err := parseTime("as_of", in.AsOf)
			if err != nil {
				return nil, "", err
			}
			m, err := c.Get(ctx, in.Namespace, in.Key, in.identity(), asOf)
			if err != nil {
				return nil, "", err
			}
			return m, memorySummary(m), nil
		},
	})
	register(s, c, tool[listArgs]{
		name: "memory_list", title: "List memories", readOnly: true,
		description: "List a namespace's memories, newest first (or by key), one page at a time: pass `next_page_token` " +
			"back as `page_token` for the next page.",
		out: client.ListAnswer{},
		run: func(ctx context.Context, c *client.Client, in listArgs) (any, string, error) {
			a, err := c.List(ctx, in.Namespace, in.options())
			if err != nil {
				return nil, "", err
			}
			return a, listSummary(a), nil
		},
	})
	register(s, c, tool[historyArgs]{
		name: "memory_history", title: "A memory's history", readOnly: true,
		description: "Every version of one key, oldest first, deletes included: how a memory changed and who changed it.",
		out:         client.HistoryAnswer{},
		run: func(ctx context.Context, c *client.Client, in historyArgs) (any, string, error) {
			a, err := c.History(ctx, in.Namespace, in.Key, in.identity())
			if err != nil {
				return nil, "", err
			}
			return a, historySummary(a), nil
		},
	})
}

func idempotency(key string) []client.CallOption {
	if key == "" {
		return nil
	}
	return []client.CallOption{client.IdempotencyKey(key)}
}

// register adds t to s. Its input schema comes from In's fields and tags, its output
// schema from the answer's type; the answer is the structured content, the summary
// the text, and an error (Loom's refusal, a bad argument, Loom unreachable) a tool
// error, never a protocol failure.
func register[In any](s *sdk.Server, c *client.Client, t tool[In]) {
	def := &sdk.Tool{Name: t.name, Title: t.title, Description: t.description,
		InputSchema: schemaOf(reflect.TypeFor[In]()), OutputSchema: schemaOf(reflect.TypeOf(t.out)),
		Annotations: &sdk.ToolAnnotations{Title: t.title, ReadOnlyHint: t.readOnly, DestructiveHint: &t.destructive,
			IdempotentHint: t.readOnly, OpenWorldHint: new(bool)}}
	sdk.AddTool(s, def, func(ctx context.Context, _ *sdk.CallToolRequest, in In) (*sdk.CallToolResult, any, error) {
		if ch, ok := any(in).(interface{ check() error }); ok {
			if err := ch.check(); err != nil {
				return toolError(t.name, err), nil, nil
			}
		}
		answer, summary, err := t.run(ctx, c, in)
		if err != nil {
			return toolError(t.name, err), nil, nil
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: summary}}}, answer, nil
	})
}

// schemas holds each type's schema, inferred once: servers are built per request.
var schemas = newSchemaSet()

func schemaOf(t reflect.Type) *jsonschema.Schema { return schemas.of(t) }

// toolError is a failed call as the model sees it: a line naming the Loom error code,
// and the error envelope as JSON for a program. No structured content: the output
// schema describes answers, and a client checks structured content against it.
func toolError(name string, err error) *sdk.CallToolResult {
	var env struct {
		Error map[string]any `json:"error"`
	}
	var text string
	var ae *argError
	e, isAPI := client.AsError(err)
	switch {
	case errors.As(err, &ae):
		text = fmt.Sprintf("%s refused: VALIDATION_FAILED (field %s): %s. Not retryable as it is.", name, ae.field, ae.msg)
		env.Error = map[string]any{"code": string(client.CodeValidationFailed), "field": ae.field, "message": ae.msg, "retryable": false}
	case isAPI:
		text = apiErrorText(name, e)
		if json.Unmarshal(e.Body, &env) != nil || env.Error == nil {
			env.Error = map[string]any{"code": string(e.Code), "message": e.Message, "retryable": e.Retryable, "status": e.Status}
		}
	default:
		text = fmt.Sprintf("%s failed: Loom could not be reached (%v). Retrying later may succeed.", name, err)
	}
	res := &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}}
	if env.Error != nil {
		b, _ := json.Marshal(env)
		res.Content = append(res.Content, &sdk.TextContent{Text: string(b)})
	}
	return res
}

func apiErrorText(name string, e *client.Error) string {
	var b strings.Builder
	code := string(e.Code)
	if code == "" {
		code = fmt.Sprintf("HTTP %d", e.Status)
	}
	fmt.Fprintf(&b, "%s refused: %s", name, code)
	if e.Field != "" {
		fmt.Fprintf(&b, " (field %s)", e.Field)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Retryable {
		wait := e.RetryAfter
		if wait <= 0 {
			wait = time.Second
		}
		fmt.Fprintf(&b, ". Retryable: try again in %s.", wait)
	} else {
		b.WriteString(". Not retryable as it is.")
	}
	return b.String()
}
