package workers

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
	loomworkers "github.com/loomplane/loom/workers"
)

// Worker names, as command names them.
const (
	resolverWorker = "conflict_resolver"
	entitiesWorker = "entity_extractor"
	profileWorker  = "structured_profile"
)

// workers is one loomd process serving the API and running the named workers against
// a scripted model, as one org's admin.
type workers struct {
	t     testing.TB
	srv   *llmtest.Server
	url   string
	org   string
	token string
	c     *testenv.Client
	tc    *client.Client
	stop  func()
	n     *app.Process
	names []string
	mod   func(*config.Config)
}

// withModel points a process at the scripted model, free of charge, with the named
// workers on and their passes woken every 100 ms.
func withModel(srv *llmtest.Server, names []string, mod func(*config.Config)) func(*config.Config) {
	return func(c *config.Config) {
		c.LLM.BaseURL, c.LLM.Model = srv.URL, "m"
		c.LLM.DefaultPrice = config.Price{}
		c.LLM.RetryBase = 10 * time.Millisecond
		c.Workers.Resolver.Enabled, c.Workers.Entities.Enabled, c.Workers.Profiles.Enabled = false, false, false
		for _, n := range names {
			switch n {
			case resolverWorker:
				c.Workers.Resolver.Enabled = true
			case entitiesWorker:
				c.Workers.Entities.Enabled = true
			case profileWorker:
				c.Workers.Profiles.Enabled = true
			}
		}
		c.Workers.Resolver.Interval, c.Workers.Entities.Interval = 100*time.Millisecond, 100*time.Millisecond
		c.Workers.Profiles.Interval = 100 * time.Millisecond
		if mod != nil {
			mod(c)
		}
	}
}

// startWorkers moves every worker's group past everything on the topic, then serves a
// process running the named ones, so a test's workers see only its own writes.
func startWorkers(t testing.TB, org string, names []string, mod func(*config.Config)) *workers {
	t.Helper()
	srv := llmtest.New(t)
	// Every pass fed by the topic, named or switched on by mod: none reads another
	// test's records.
	for _, n := range loomworkers.Names() {
		if loomworkers.Fed(n) {
			resetGroup(t, n, "latest")
		}
	}
	w := &workers{t: t, srv: srv, org: org, names: names, mod: mod}
	w.serve()
	return w
}

func (w *workers) serve() {
	w.t.Helper()
	n, url, stop := env.Serve(w.t, []string{"api", "workers"}, withModel(w.srv, w.names, w.mod))
	w.n = n
	if w.token == "" {
		w.token = env.Token(w.t, n, auth.NewToken{Org: w.org})
	}
	w.url, w.stop = url, stop
	w.c = testenv.NewClient(url, w.token)
	w.tc = w.c.Typed(w.t)
}

// replay stops the process, moves the workers' groups to target (earliest, latest or
// an RFC 3339 time) and serves a new process: the groups read the topic again.
func (w *workers) replay(target string) {
	w.t.Helper()
	w.stop()
	for _, n := range w.names {
		resetGroup(w.t, n, target)
	}
	w.serve()
}

// resetGroup moves a worker's consumer group to target (testenv.ResetGroup).
func resetGroup(t testing.TB, worker, target string) {
	t.Helper()
	env.ResetGroup(t, loomworkers.Group(worker), target)
}

// drained waits until the org owes the worker nothing and the worker's group has read
// the whole topic.
func drained(t testing.TB, pool *pgxpool.Pool, worker, org string) {
	t.Helper()
	topic := env.Config(nil).Pipeline.Topic
	testenv.Eventually(t, 60*time.Second, worker+" to drain org "+org, func() bool {
		// The org's records on the topic first (the outbox empty), then the group past
		// them, then nothing owed.
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1`, org) == 0 &&
			env.GroupCaughtUp(t, loomworkers.Group(worker), topic) &&
			testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = $1 AND org = $2 AND state = 'owed'`, worker, org) == 0
	})
}

// judgePrompt is what the resolver's prompt names: NEW's value, and each peer's.
type judgePrompt struct {
	newValue string
	peers    []string // p1..pN's values
	keys     []string
}

var peerLine = regexp.MustCompile(`^p(\d+) \(key "([^"]*)"`)

// readJudgePrompt reads a resolver's request (values are one line each in these tests).
func readJudgePrompt(r llmtest.ChatRequest) (judgePrompt, bool) {
	if r.SchemaName != "conflict_judgements" || len(r.Messages) < 2 {
		return judgePrompt{}, false
	}
	var p judgePrompt
	lines := strings.Split(r.Messages[len(r.Messages)-1].Content, "\n")
	for i := 0; i+1 < len(lines); i++ {
		switch {
		case strings.HasPrefix(lines[i], "NEW ("):
			p.newValue = lines[i+1]
		case peerLine.MatchString(lines[i]):
			p.peers = append(p.peers, lines[i+1])
			p.keys = append(p.keys, peerLine.FindStringSubmatch(lines[i])[2])
		}
	}
	return p, p.newValue != ""
}

// newMoveJudge is a scripted judge for which a home city moving from Lisbon to Berlin
// is an update, and every other pair unrelated.
func newMoveJudge(srv *llmtest.Server) *scriptedJudge {
	return newScriptedJudge(srv, func(newValue, peer string) (string, float64) {
		if strings.Contains(peer, "Lisbon") && strings.Contains(newValue, "Berlin") {
			return "update", 0.99
		}
		return "unrelated", 0.97
	}, nil)
}

// verdictFor is a scripted judge's verdict of NEW against one peer.
type verdictFor func(newValue, peer string) (verdict string, confidence float64)

// judgeWith answers every resolver request with judge's verdicts, and records them.
type scriptedJudge struct {
	mu      sync.Mutex
	judged  map[[2]string]judgeCall // (new, peer) → the verdict given
	prompts []judgePrompt
}

type judgeCall struct {
	verdict    string
	confidence float64
}

func newScriptedJudge(srv *llmtest.Server, judge verdictFor, other func(llmtest.ChatRequest) llmtest.Reply) *scriptedJudge {
	s := &scriptedJudge{judged: map[[2]string]judgeCall{}}
	srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		p, ok := readJudgePrompt(r)
		if !ok {
			if other != nil {
				return other(r)
			}
			return llmtest.Status(500, "unscripted")
		}
		var entries []map[string]any
		s.mu.Lock()
		s.prompts = append(s.prompts, p)
		for i, peer := range p.peers {
			v, c := judge(p.newValue, peer)
			s.judged[[2]string{p.newValue, peer}] = judgeCall{v, c}
			stale := v == "update" || v == "contradiction"
			entries = append(entries, map[string]any{"peer": "p" + itoa(i+1), "reason": "scripted", "same_entity": stale || v == "restatement",
				"same_attribute": stale || v == "restatement", "verdict": v, "confidence": c})
		}
		s.mu.Unlock()
		return llmtest.JSON(map[string]any{"judgements": entries})
	})
	return s
}

func (s *scriptedJudge) calls() []judgePrompt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]judgePrompt(nil), s.prompts...)
}

func (s *scriptedJudge) verdict(newValue, peer string) (judgeCall, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.judged[[2]string{newValue, peer}]
	return c, ok
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// value is a memory's value as the tests write them: a JSON string.
func value(m *client.Memory) string {
	var s string
	json.Unmarshal(m.Value, &s)
	return s
}

func get(t testing.TB, tc *client.Client, ns, key string, id client.Identity) *client.Memory {
	t.Helper()
	m, err := tc.Get(context.Background(), ns, key, id, time.Time{})
	if err != nil {
		t.Fatalf("get %s/%s: %v", ns, key, err)
	}
	return m
}

func set(t testing.TB, tc *client.Client, ns, key, v string, id client.Identity) *client.SetAnswer {
	t.Helper()
	a, err := tc.Set(context.Background(), ns, key, client.SetRequest{Value: v, Identity: id})
	if err != nil {
		t.Fatalf("set %s/%s: %v", ns, key, err)
	}
	return a
}
