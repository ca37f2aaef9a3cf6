package workers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// digestCallTime is how long the scripted model takes over each session_digest call in
// BenchmarkResolverDelayBehindDigests: a batch of ten sessions is a 3 s pass.
const digestCallTime = 300 * time.Millisecond

// BenchmarkResolverDelayBehindDigests measures how long a conflicting write waits for
// the conflict resolver's judgement while the session_digest pass is busy with long
// batches (a session owing a digest observed every 100 ms, each model call
// digestCallTime), with the pass gate (workers/pacing.go) over every pass
// (LOOM_WORKERS_PASS_GATE=all) and over the background passes only (background). An op
// is one conflicting write in a manual_review namespace (a new home city of one user,
// at most 12 ops) and its wait until the resolver's item for it is done; it reports the
// delay's p50 and max.
//
//	go test ./tests/workers -run '^$' -bench ResolverDelayBehindDigests -benchtime 8x
func BenchmarkResolverDelayBehindDigests(b *testing.B) {
	for _, gate := range []string{config.GateAll, config.GateBackground} {
		b.Run("gate="+gate, func(b *testing.B) { resolverDelay(b, gate) })
	}
}

func resolverDelay(b *testing.B, gate string) {
	org := "resolverdelay" + gate
	w := startWorkers(b, org, []string{resolverWorker}, func(c *config.Config) {
		withSessionDigests(c)
		c.Workers.SessionDigest.Batch = 10
		c.Workers.Pacing.Gate = gate
	})
	var digests atomic.Int64
	w.srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		if r.SchemaName == "session_digest" {
			digests.Add(1)
			time.Sleep(digestCallTime)
			return llmtest.JSON(map[string]any{"digest": "The user and the agent exchanged three turns."})
		}
		p, ok := readJudgePrompt(r)
		if !ok {
			return llmtest.Status(500, "unscripted")
		}
		var entries []map[string]any
		for i := range p.peers {
			entries = append(entries, map[string]any{"peer": "p" + itoa(i+1), "reason": "the user moved", "same_entity": true,
				"same_attribute": false, "verdict": "related", "confidence": 0.95})
		}
		return llmtest.JSON(map[string]any{"judgements": entries})
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := env.PG(b)
	ns, sessions := testenv.Unique(b, "delay"), testenv.Unique(b, "sessions")
	if _, err := w.tc.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "manual_review"}); err != nil {
		b.Fatal(err)
	}
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := w.tc.Observe(ctx, sessions, client.ObserveRequest{Identity: client.Identity{UserID: "bob", SessionID: fmt.Sprintf("s%d", i)},
				Turns: turns("Tell me about kayaks", "What about them?", "How to start")}); err != nil && ctx.Err() == nil && i < 3 {
				b.Logf("observing a session: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	alice := client.Identity{UserID: "alice"}
	set(b, w.tc, ns, "home-0", "The user alice lives in the city of Lisbon in Portugal", alice)
	// A namespace whose sessions keep coming is never done: the pass's model calls say
	// it is at work.
	testenv.Eventually(b, 60*time.Second, "the digest pass busy", func() bool { return digests.Load() > 0 })
	cities := []string{"Berlin in Germany", "Madrid in Spain", "Vienna in Austria", "Oslo in Norway", "Rome in Italy", "Paris in France",
		"Dublin in Ireland", "Warsaw in Poland", "Prague in Czechia", "Athens in Greece", "Helsinki in Finland", "Bern in Switzerland"}
	var delays []time.Duration
	b.ResetTimer()
	if b.N > len(cities) {
		b.Fatalf("at most %d ops (-benchtime %dx)", len(cities), len(cities))
	}
	for i := 0; i < b.N; i++ {
		start := time.Now()
		a := set(b, w.tc, ns, fmt.Sprintf("home-%d", i+1), "The user alice lives in the city of "+cities[i%len(cities)], alice)
		if a.Verdict != "conflict" {
			b.Fatalf("write %d: verdict %s; want conflict (a write the resolver owes a judgement)", i, a.Verdict)
		}
		for testenv.Int(b, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = 'conflict_resolver' AND org = $1
			AND memory_id = $2::uuid AND state = 'done'`, org, a.MemoryID) == 0 {
			if time.Since(start) > 2*time.Minute {
				b.Fatalf("write %d not judged within 2 minutes", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
		delays = append(delays, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(delays)
	b.ReportMetric(float64(delays[len(delays)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(delays[len(delays)-1].Milliseconds()), "max-ms")
	b.Logf("gate=%s delays: %s", gate, strings.Trim(fmt.Sprint(delays), "[]"))
}
