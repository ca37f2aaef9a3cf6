package bench

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/llm/llmtest"
)

// extractFacts is how many facts (one per message) each transcript of the extract
// scenario states.
const extractFacts = 10

// ScriptedModel is the model name `loomd bench` gives the scripted provider.
const ScriptedModel = "bench-scripted"

// ScriptedProvider is an OpenAI-compatible server that answers the extract scenario's
// calls at once: every "[n] user: I like X." of the transcript is a fact. `loomd
// bench` points the process under test at it when no provider is configured, so the
// scenario measures Loom's pipeline, not a model.
type ScriptedProvider struct {
	*llmtest.Server
	owner *owner
}

// StartScriptedProvider starts one; Close stops it and reports what went wrong.
func StartScriptedProvider() *ScriptedProvider {
	o := &owner{}
	srv := llmtest.New(o)
	stated := regexp.MustCompile(`\[(\d+)\] user: I like (\w+)\.`)
	srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		facts := []any{}
		for _, m := range stated.FindAllStringSubmatch(r.Text(), -1) {
			i, _ := strconv.Atoi(m[1])
			facts = append(facts, map[string]any{"key": "user.likes_" + m[2], "value": "Likes " + m[2], "message_index": i, "tags": []any{}, "about": "user"})
		}
		return llmtest.JSON(map[string]any{"facts": facts, "forget": []any{}})
	})
	return &ScriptedProvider{Server: srv, owner: o}
}

// Close stops the server; an error is a call the script could not answer.
func (p *ScriptedProvider) Close() error { return p.owner.finish() }

// owner is the llmtest.Owner of a server outside a test.
type owner struct {
	cleanups []func()
	errs     []string
}

func (o *owner) Cleanup(f func()) { o.cleanups = append(o.cleanups, f) }
func (o *owner) Errorf(format string, args ...any) {
	o.errs = append(o.errs, fmt.Sprintf(format, args...))
}
func (o *owner) finish() error {
	for i := len(o.cleanups) - 1; i >= 0; i-- {
		o.cleanups[i]()
	}
	if len(o.errs) > 0 {
		return fmt.Errorf("the scripted provider: %s", o.errs[0])
	}
	return nil
}

// extract measures memory.set_from_messages of a transcript of extractFacts facts
// against a memory.bulk_set of the same facts, each rep into a fresh namespace: the
// pipeline's time per request with the provider's own time (model_ms) subtracted, and
// its round trips to the provider.
func (r *runner) extract(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title:    fmt.Sprintf("memory.set_from_messages of a %d-fact transcript, ms per request", extractFacts),
		Baseline: fmt.Sprintf("memory.bulk_set of the same %d facts", extractFacts),
		Notes: []string{"Loom's time is the request's wall time less model_ms, the time it waited for the provider; " +
			"against the scripted provider of `loomd bench` unless LOOM_LLM_BASE_URL names one"},
	}
	var fromTook, bulkTook []time.Duration
	var calls, modelMs float64
	start := time.Now()
	for rep := 0; rep == 0 || time.Since(start) < r.opts.Duration; rep++ {
		var msgs []client.Message
		var batch []client.BulkEntry
		for i := range extractFacts {
			thing := fmt.Sprintf("thing%dx%d", rep, i)
			msgs = append(msgs, client.Message{Role: "user", Content: "I like " + thing + "."})
			batch = append(batch, client.BulkEntry{Key: "user.likes_" + thing, Value: "Likes " + thing})
		}
		t0 := time.Now()
		a, err := r.api.FromMessages(ctx, r.namespace("extract", fmt.Sprint(rep)), client.FromMessagesRequest{Messages: msgs})
		if err != nil {
			return nil, fmt.Errorf("memory.set_from_messages: %w", err)
		}
		took := time.Since(t0) - time.Duration(a.ModelMs*float64(time.Millisecond))
		if len(a.Facts) != extractFacts {
			return nil, fmt.Errorf("memory.set_from_messages extracted %d facts, want %d (is the provider the scripted one?)", len(a.Facts), extractFacts)
		}
		fromTook, calls, modelMs = append(fromTook, took), calls+float64(a.ModelCalls), modelMs+a.ModelMs
		t0 = time.Now()
		if _, err := r.api.BulkSet(ctx, r.namespace("extractbulk", fmt.Sprint(rep)), client.BulkSetRequest{Entries: batch}); err != nil {
			return nil, fmt.Errorf("memory.bulk_set: %w", err)
		}
		bulkTook = append(bulkTook, time.Since(t0))
		r.progress("  memory.set_from_messages: %s besides %.1f ms of the provider's; memory.bulk_set: %s",
			took.Round(time.Millisecond), a.ModelMs, bulkTook[len(bulkTook)-1].Round(time.Millisecond))
	}
	n := float64(len(fromTook))
	name := fmt.Sprintf("%d facts", extractFacts)
	res.add(name, "ms per request, the provider's time subtracted (mean)", meanMS(fromTook), meanMS(bulkTook))
	res.add(name, "model round trips per request", round(calls/n, 2), 0)
	res.add(name, "provider ms per request (mean)", round(modelMs/n, 2), 0)
	res.Samples = append(res.Samples, CaseSamples{Case: name,
		Loom:     Sample{Concurrency: 1, Calls: len(fromTook), Seconds: round(sum(fromTook).Seconds(), 2)},
		Baseline: &Sample{Concurrency: 1, Calls: len(bulkTook), Seconds: round(sum(bulkTook).Seconds(), 2)}})
	return res, nil
}
