package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// The budgets of this test, lowered from the defaults so a freeze a few seconds
// longer than every one of them keeps the test short.
const (
	freezePGRead     = time.Second             // LOOM_PG_READ_DEADLINE_MS
	freezeCHRead     = time.Second             // LOOM_CH_READ_DEADLINE_MS
	freezeBarrier    = 1500 * time.Millisecond // LOOM_PG_PROJECTION_WAIT_MS
	freezeWrite      = 2 * time.Second         // LOOM_PG_WRITE_DEADLINE_MS
	freezeReadyCheck = 3 * time.Second         // a readiness probe's check of each store
	freezeFor        = 6 * time.Second         // longer than every budget above
)

// A store that freezes (SIGSTOP: its sockets stay open and nothing answers) makes no
// request hang: with Postgres frozen, point reads, lists, searches, history, writes
// and a token's check answer the retryable 503 POSTGRES_UNAVAILABLE with Retry-After
// within their budgets, and readiness names Postgres alone; with ClickHouse frozen,
// point reads still answer 200, searches and lists answer the seeds' 503
// PROJECTION_BEHIND (a read past the barrier ClickHouse does not answer), a judged
// write 503 PROJECTION_BEHIND, and readiness names
// ClickHouse alone, while a process on the index path goes on searching and judging
// writes (only its history answers 503). Each answer comes before the freeze ends; the
// times are logged against their budgets, not asserted.
func TestFrozenStoresAnswerWithinTheirBudgets(t *testing.T) {
	p := projection(t)
	n, url, _ := env.Serve(t, []string{"api", "relay", "projector"}, func(c *config.Config) {
		c.Pipeline.Projection = p
		c.PG.ReadDeadline, c.ClickHouse.ReadDeadline = freezePGRead, freezeCHRead
		c.Query.ProjectionWait, c.Command.WriteDeadline = freezeBarrier, freezeWrite
	})
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	// A second process on the index path (LOOM_SEARCH_INDEX=memory, the default outside
	// this suite): its peers and search legs read its own index, not ClickHouse.
	_, indexURL, _ := env.Serve(t, []string{"api"}, func(c *config.Config) {
		c.SearchIndex.Mode = config.SearchIndexMemory
		c.Pipeline.Projection = p
		c.PG.ReadDeadline, c.ClickHouse.ReadDeadline = freezePGRead, freezeCHRead
		c.Query.ProjectionWait, c.Command.WriteDeadline = freezeBarrier, freezeWrite
	})
	unused := env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader}) // its first check needs Postgres
	// judged takes the index path's judged write: one in ns would move ns's generation
	// past what the frozen projection holds while the ClickHouse-path reads of ns capture
	// theirs, and they would wait at the barrier instead of reaching ClickHouse.
	ns, plain, judged := testenv.Unique(t, "frozen"), testenv.Unique(t, "frozen-plain"), testenv.Unique(t, "frozen-judged")
	c.AppendOnly(t, plain)
	c.Set(t, ns, "color", "the sky is blue")
	c.Set(t, plain, "color", "the sea is green")
	c.Set(t, judged, "color", "the wind is warm")
	key := "/v1/namespaces/" + ns + "/memories/color"
	indexed := testenv.NewClient(indexURL, c.Token)
	testenv.Eventually(t, 30*time.Second, "the projection and the index to serve the namespace", func() bool {
		return c.Search(t, ns, "sky", 3).Status == http.StatusOK && indexed.Search(t, ns, "sky", 3).Status == http.StatusOK &&
			indexed.Search(t, judged, "wind", 3).Status == http.StatusOK
	})

	type call struct {
		name         string
		method, path string
		body         string
		token        string
		budget       time.Duration
		status       int
		code         string // the envelope's code ("" for a body that is no envelope)
		check        func(body map[string]any) error
		base         string // the process asked, when not the ClickHouse-path one
	}
	search := `{"query": "sky"}`
	run := func(phase string, freeze, thaw func() error, calls []call) {
		t.Helper()
		if err := freeze(); err != nil {
			t.Fatal(err)
		}
		thawed := false
		defer func() {
			if !thawed {
				thaw()
			}
		}()
		frozenAt := time.Now()
		type answer struct {
			status     int
			header     http.Header
			body       []byte
			took       time.Duration
			err        error
			beforeThaw bool
		}
		answers := make([]answer, len(calls))
		var wg sync.WaitGroup
		httpc := &http.Client{Timeout: freezeFor + 30*time.Second}
		for i, cl := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var body io.Reader
				if cl.body != "" {
					body = strings.NewReader(cl.body)
				}
				req, _ := http.NewRequest(cl.method, or(cl.base, url)+cl.path, body)
				if tok := or(cl.token, c.Token); tok != "-" {
					req.Header.Set("Authorization", "Bearer "+tok)
				}
				start := time.Now()
				resp, err := httpc.Do(req)
				a := answer{took: time.Since(start), err: err}
				a.beforeThaw = time.Since(frozenAt) < freezeFor
				if err == nil {
					a.status, a.header = resp.StatusCode, resp.Header
					a.body, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				answers[i] = a
			}()
		}
		// Thaw once the freeze has outlasted every budget, whether or not everything answered.
		time.Sleep(time.Until(frozenAt.Add(freezeFor)))
		if err := thaw(); err != nil {
			t.Fatal(err)
		}
		thawed = true
		wg.Wait()
		for i, cl := range calls {
			a := answers[i]
			t.Logf("%s frozen: %-34s budget %5dms  answered in %5dms  %d %s", phase, cl.name, cl.budget.Milliseconds(), a.took.Milliseconds(), a.status, codeOf(a.body))
		}
		for i, cl := range calls {
			a := answers[i]
			switch {
			case a.err != nil:
				t.Errorf("%s frozen, %s: %v", phase, cl.name, a.err)
				continue
			case !a.beforeThaw:
				t.Errorf("%s frozen, %s: answered only after the freeze ended (%s): it waited for the store", phase, cl.name, a.took.Round(time.Millisecond))
			}
			var m map[string]any
			json.Unmarshal(a.body, &m)
			e, _ := m["error"].(map[string]any)
			switch {
			case a.status != cl.status || codeOf(a.body) != cl.code:
				t.Errorf("%s frozen, %s: %d %s, want %d %s", phase, cl.name, a.status, a.body, cl.status, cl.code)
			case cl.status == http.StatusServiceUnavailable && cl.code != "" && (e["retryable"] != true || a.header.Get("Retry-After") == ""):
				t.Errorf("%s frozen, %s: a 503 that is not retryable, or without Retry-After: %v %s", phase, cl.name, a.header, a.body)
			case cl.check != nil:
				if err := cl.check(m); err != nil {
					t.Errorf("%s frozen, %s: %v: %s", phase, cl.name, err, a.body)
				}
			}
		}
	}
	// Readiness names the failing store by a stable code, never by the driver's text
	// (which names addresses).
	readyCodes := map[string]string{"postgres": "POSTGRES_UNAVAILABLE", "clickhouse": "CLICKHOUSE_UNAVAILABLE"}
	readyNames := func(failing, ok string) func(map[string]any) error {
		return func(m map[string]any) error {
			checks, _ := m["checks"].(map[string]any)
			if checks[ok] != "ok" || checks[failing] != readyCodes[failing] || m["ready"] != false {
				return fmt.Errorf("readiness must name %s failing (%s) and %s ok", failing, readyCodes[failing], ok)
			}
			return nil
		}
	}
	afterBarrier := freezeBarrier + freezeCHRead

	// Health's details are the operator's: its token, checked once before the freeze,
	// is answered from the process's token cache while Postgres is frozen.
	operator := env.Token(t, n, auth.NewToken{Role: auth.RoleOperator})
	if r := testenv.NewClient(url, operator).Do(t, http.MethodGet, "/v1/health", nil); r.Status != http.StatusOK {
		t.Fatalf("the operator's health: %d %s", r.Status, r.Body)
	}
	run("Postgres", env.Stack.Postgres.Freeze, env.Stack.Postgres.Thaw, []call{
		{name: "memory.get", method: http.MethodGet, path: key, budget: freezePGRead, status: 503, code: "POSTGRES_UNAVAILABLE"},
		{name: "memory.get, a token not seen yet", method: http.MethodGet, path: key, token: unused, budget: freezePGRead, status: 503, code: "POSTGRES_UNAVAILABLE"},
		{name: "memory.list", method: http.MethodGet, path: "/v1/namespaces/" + ns + "/memories", budget: freezeBarrier, status: 503, code: "POSTGRES_UNAVAILABLE"},
		{name: "memory.search", method: http.MethodPost, path: "/v1/namespaces/" + ns + "/memories:search", body: search, budget: freezeBarrier, status: 503, code: "POSTGRES_UNAVAILABLE"},
		{name: "memory.history", method: http.MethodGet, path: key + "/history", budget: freezePGRead, status: 503, code: "POSTGRES_UNAVAILABLE"},
		{name: "memory.set", method: http.MethodPut, path: key, body: `{"value": "the sky is grey"}`, budget: freezeWrite, status: 503, code: "POSTGRES_UNAVAILABLE"},
		{name: "health/ready", method: http.MethodGet, path: "/v1/health/ready", token: "-", budget: freezeReadyCheck, status: 503, check: readyNames("postgres", "clickhouse")},
		{name: "health?include=postgres,lag", method: http.MethodGet, path: "/v1/health?include=postgres,lag", token: "-", budget: 2 * time.Second, status: 200},
		{name: "health?include=postgres,lag, operator", method: http.MethodGet, path: "/v1/health?include=postgres,lag", token: operator, budget: 2 * time.Second, status: 200,
			check: func(m map[string]any) error {
				if m["postgres"] == nil || m["lag"] == nil {
					return fmt.Errorf("the operator's health must carry postgres and lag (or their errors)")
				}
				return nil
			}},
	})
	testenv.Eventually(t, 30*time.Second, "reads to answer once Postgres thawed", func() bool {
		return c.Do(t, http.MethodGet, key, nil).Status == http.StatusOK && c.Search(t, ns, "sky", 3).Status == http.StatusOK
	})

	run("ClickHouse", env.Stack.ClickHouse.Freeze, env.Stack.ClickHouse.Thaw, []call{
		{name: "memory.get", method: http.MethodGet, path: key, budget: freezePGRead, status: 200},
		{name: "memory.search", method: http.MethodPost, path: "/v1/namespaces/" + ns + "/memories:search", body: search, budget: afterBarrier, status: 503, code: "PROJECTION_BEHIND"},
		{name: "memory.history", method: http.MethodGet, path: key + "/history", budget: freezePGRead, status: 200}, // the journal's
		{name: "memory.list", method: http.MethodGet, path: "/v1/namespaces/" + ns + "/memories", budget: afterBarrier, status: 503, code: "PROJECTION_BEHIND"},
		// The peer read is ClickHouse's (the seeds' answer: PROJECTION_BEHIND); an
		// append_only write reads no peers and commits.
		{name: "memory.set, judged", method: http.MethodPut, path: "/v1/namespaces/" + ns + "/memories/weather", body: `{"value": "it rains in the valley"}`, budget: freezeCHRead, status: 503, code: "PROJECTION_BEHIND"},
		{name: "memory.set, append_only", method: http.MethodPut, path: "/v1/namespaces/" + plain + "/memories/weather", body: `{"value": "it rains in the valley"}`, budget: freezeWrite, status: 200},
		{name: "health/ready", method: http.MethodGet, path: "/v1/health/ready", token: "-", budget: freezeReadyCheck, status: 503, check: readyNames("clickhouse", "postgres")},
		// On the index path searches, judged writes and history go on.
		{name: "index path: memory.search", base: indexURL, method: http.MethodPost, path: "/v1/namespaces/" + ns + "/memories:search", body: search, budget: freezeBarrier, status: 200, check: hitsKey("color")},
		{name: "index path: memory.set, judged", base: indexURL, method: http.MethodPut, path: "/v1/namespaces/" + judged + "/memories/wind", body: `{"value": "the wind blows from the west"}`, budget: freezeWrite, status: 200},
		{name: "index path: memory.history", base: indexURL, method: http.MethodGet, path: key + "/history", budget: freezePGRead, status: 200},
	})
	testenv.Eventually(t, 60*time.Second, "searches to answer once ClickHouse thawed", func() bool {
		return c.Search(t, ns, "sky", 3).Status == http.StatusOK && c.Search(t, plain, "rains", 3).Status == http.StatusOK
	})
}

// hitsKey checks that a search answer's first hit is the key's.
func hitsKey(key string) func(map[string]any) error {
	return func(m map[string]any) error {
		hits, _ := m["hits"].([]any)
		if len(hits) == 0 {
			return fmt.Errorf("no hits, want %s", key)
		}
		if first, _ := hits[0].(map[string]any); first["memory_key"] != key {
			return fmt.Errorf("first hit %v, want %s", first["memory_key"], key)
		}
		return nil
	}
}

// or is a when it is set, else b.
func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func codeOf(body []byte) string {
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(body, &env)
	return env.Error.Code
}
