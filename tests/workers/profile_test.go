package workers

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// profileSchema is a namespace's profile schema: a name, a home city and what the user
// likes, each unknown until a fact states it.
var profileSchema = map[string]any{
	"type": "object", "additionalProperties": false, "required": []string{"name", "city", "likes"},
	"properties": map[string]any{
		"name":  map[string]any{"type": []string{"string", "null"}},
		"city":  map[string]any{"type": []string{"string", "null"}},
		"likes": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
	},
}

// scriptedProfiler answers the structured_profile pass: its first answer is outside the
// schema (city a number), every later one a profile read off the prompt's facts.
type scriptedProfiler struct {
	mu    sync.Mutex
	calls int
}

func (p *scriptedProfiler) answer(r llmtest.ChatRequest) llmtest.Reply {
	if r.SchemaName != "structured_profile" {
		return llmtest.Status(500, "unscripted")
	}
	p.mu.Lock()
	p.calls++
	first := p.calls == 1
	p.mu.Unlock()
	if first {
		return llmtest.Raw(`{"name": "Ana", "city": 7, "likes": []}`)
	}
	city := any(nil)
	for _, c := range []string{"Lisbon", "Porto"} {
		if r.Contains(c) {
			city = c
		}
	}
	likes := []string{}
	if r.Contains("espresso") {
		likes = append(likes, "espresso")
	}
	return llmtest.JSON(map[string]any{"name": "Ana", "city": city, "likes": likes})
}

func (p *scriptedProfiler) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// A user's structured profile follows the namespace's schema: setting the schema builds
// the profile of a user whose facts were written before it; the model's first answer,
// outside the schema, is refused and asked again and never stored; the profile is rebuilt when
// one of its facts changes and not otherwise (a replay of the pass's group, a write in
// a namespace without a schema); profile.render renders it; and it vanishes with the
// user's erasure.
func TestStructuredProfileFollowsSchemaAndFactsAndVanishesWithErasure(t *testing.T) {
	const org = "profiles"
	w := startWorkers(t, org, []string{profileWorker}, nil)
	profiler := &scriptedProfiler{}
	w.srv.Script(profiler.answer)
	pool := env.PG(t)
	ns, other := testenv.Unique(t, "prof"), testenv.Unique(t, "plain")

	bad := w.c.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/profile-schema",
		[]byte(`{"schema": {"type": "object", "properties": {"city": {"type": "string"}}}}`))
	if bad.Status != http.StatusUnprocessableEntity || bad.ErrorCode() != "VALIDATION_FAILED" {
		t.Fatalf("a schema outside strict mode's subset: %d %s; want 422 VALIDATION_FAILED", bad.Status, bad.Body)
	}

	put := func(ns, key, value string) {
		t.Helper()
		if r := w.c.Put(t, ns, key, map[string]any{"value": value, "user_id": "ana"}); r.Status != http.StatusOK {
			t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
		}
	}
	profile := func() (map[string]any, int) {
		t.Helper()
		r := w.c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/profiles/ana", nil)
		if r.Status != http.StatusOK {
			return nil, r.Status
		}
		return r.JSON(t), r.Status
	}
	// Facts written before the schema: setting it builds their user's profile.
	put(ns, "home", "Ana lives in Lisbon")
	put(ns, "coffee", "Ana drinks espresso every morning")
	body, _ := json.Marshal(map[string]any{"schema": profileSchema})
	if r := w.c.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/profile-schema", body); r.Status != http.StatusOK {
		t.Fatalf("profile_schema.set: %d %s", r.Status, r.Body)
	}
	testenv.Eventually(t, 60*time.Second, "ana's profile to be built", func() bool {
		_, status := profile()
		return status == http.StatusOK
	})
	drained(t, pool, profileWorker, org)

	p, status := profile()
	if status != http.StatusOK {
		t.Fatalf("profile.structured: %d; want the built profile", status)
	}
	got := p["profile"].(map[string]any)
	if got["city"] != "Lisbon" || p["stale"] != false || p["sources"] != float64(2) {
		t.Fatalf("profile %v; want city Lisbon, built from 2 facts, not stale", p)
	}
	history := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, 'profile:ana'))`, org, ns)
	calls := profiler.count()
	if history != 1 || calls < 2 {
		t.Fatalf("profile revisions %d after %d model calls; want the out-of-schema answer refused, asked again, one revision stored", history, calls)
	}

	r := w.c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/profiles/ana/render?format=markdown", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("profile.render: %d %s", r.Status, r.Body)
	}
	rendered := r.JSON(t)
	if text := rendered["text"].(string); !strings.Contains(text, "**city**: Lisbon") || !strings.Contains(text, "espresso") ||
		!strings.HasPrefix(rendered["citation"].(string), ns+"/profile:ana@") {
		t.Fatalf("profile.render: %v", rendered)
	}
	mcpStructuredProfile(t, w, ns, p)

	// Nothing its facts hold changed: a write elsewhere and a replay of the group from
	// the topic's start build nothing.
	put(other, "home", "Ana lives in Porto")
	w.replay("earliest")
	drained(t, pool, profileWorker, org)
	again, _ := profile()
	if profiler.count() != calls || again["version_text"] != p["version_text"] {
		t.Fatalf("model calls %d → %d, version %v → %v; want no rebuild while the facts are unchanged",
			calls, profiler.count(), p["version_text"], again["version_text"])
	}

	// A source fact changes: the profile is rebuilt from it.
	put(ns, "home", "Ana moved to Porto")
	drained(t, pool, profileWorker, org)
	moved, _ := profile()
	if moved["profile"].(map[string]any)["city"] != "Porto" || moved["version_text"] == p["version_text"] || moved["stale"] != false {
		t.Fatalf("profile after the move %v; want a new version with city Porto", moved)
	}

	// The pass is counted in /metrics and its queue in /v1/health.
	op := env.Operator(t, w.url)
	health := op.Do(t, http.MethodGet, "/v1/health?include=workers", nil).JSON(t)
	queue, _ := health["workers"].(map[string]any)[profileWorker].(map[string]any)
	if queue == nil || queue["done"].(float64) < 1 || queue["owed"] != float64(0) {
		t.Fatalf("health's structured_profile queue %v; want items done and none owed", health["workers"])
	}
	if m := op.Do(t, http.MethodGet, "/metrics", nil); !strings.Contains(string(m.Body), `loom_structured_profile_builds_total{outcome="built"}`) {
		t.Fatalf("/metrics does not count the pass's builds")
	}

	// A profile is the user's row: their erasure takes it.
	w.c.Erase(t, map[string]any{"user_id": "ana", "namespace": ns})
	drained(t, pool, profileWorker, org)
	if _, status := profile(); status != http.StatusNotFound {
		t.Fatalf("profile.structured after the user's erasure: %d; want 404", status)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, 'profile:ana'))`, org, ns); n != 0 {
		t.Fatalf("%d profile revisions left after the erasure", n)
	}
}

// mcpStructuredProfile: the MCP tool profile_structured answers the profile REST
// answers, as its JSON object, over the go-sdk's client and the process's /mcp.
func mcpStructuredProfile(t *testing.T, w *workers, ns string, rest map[string]any) {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: w.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{w.token}}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "loom-workers-test"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "profile_structured",
		Arguments: map[string]any{"namespace": ns, "user_id": "ana"}})
	if err != nil {
		t.Fatalf("profile_structured: %v", err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var got client.Profile
	if err := json.Unmarshal(raw, &got); err != nil || res.IsError {
		t.Fatalf("profile_structured: error %v, %s", res.IsError, raw)
	}
	var fields map[string]any
	json.Unmarshal(got.Profile, &fields)
	if fields["city"] != "Lisbon" || got.VersionText != rest["version_text"] || got.MemoryKey != "profile:ana" || got.Stale {
		t.Fatalf("profile_structured answered %s; want REST's profile %v", raw, rest)
	}
}
