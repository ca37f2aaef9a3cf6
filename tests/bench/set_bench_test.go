package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// words is a vocabulary for values that are not each other's peers: a benchmark of
// memory.set should measure the write path, not a pile-up of conflicts.
var words = func() []string {
	syll := []string{"ka", "lo", "mi", "ru", "te", "zan", "pol", "dre", "vu", "sho", "ne", "gri", "ta", "bel", "quo", "fi"}
	var out []string
	for _, a := range syll {
		for _, b := range syll {
			for _, c := range syll[:8] {
				out = append(out, a+b+c)
			}
		}
	}
	return out
}()

func sentence(r *rand.Rand) string {
	var w []string
	for i := 0; i < 10; i++ {
		w = append(w, words[r.IntN(len(words))])
	}
	return strings.Join(w, " ")
}

// run issues n calls from c goroutines and reports latency percentiles and rate.
func run(b *testing.B, c int, call func(worker, i int) error) {
	b.Helper()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := call(w, i); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)-1)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
}

// BenchmarkMemorySet is memory.set over HTTP (verdict, admission, commit; relay and
// projector running) at concurrency 1, 8 and 32, into one namespace and across 32.
func BenchmarkMemorySet(b *testing.B) {
	n, url := env.API(b, nil)
	c := testenv.NewClient(url, env.Token(b, n, auth.NewToken{Org: "bench"}))
	for _, spaces := range []int{1, 32} {
		for _, conc := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("namespaces=%d/concurrency=%d", spaces, conc), func(b *testing.B) {
				prefix := testenv.Unique(b, "set")
				rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
				var mu sync.Mutex
				run(b, conc, func(w, i int) error {
					mu.Lock()
					v := sentence(rng)
					mu.Unlock()
					body, _ := json.Marshal(map[string]any{"value": v})
					r := c.Do(b, http.MethodPut, fmt.Sprintf("/v1/namespaces/%s-%d/memories/k%d", prefix, i%spaces, i), body)
					if r.Status != http.StatusOK {
						return fmt.Errorf("memory.set: %d %s", r.Status, r.Body)
					}
					return nil
				})
			})
		}
	}
}

// BenchmarkRawCommit is the baseline: the same Postgres transaction shape memory.set
// commits (generation advance, head lock and upsert, revision, data key, outbox row),
// issued directly with pgx into copies of the tables, at the same concurrencies.
func BenchmarkRawCommit(b *testing.B) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, env.Stack.Postgres.DSN()+"&pool_max_conns=40")
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	for _, ddl := range []string{
		"CREATE SCHEMA IF NOT EXISTS bench_raw",
		"CREATE TABLE IF NOT EXISTS bench_raw.scope_generations (LIKE loom.scope_generations INCLUDING ALL)",
		"CREATE TABLE IF NOT EXISTS bench_raw.memory_current (LIKE loom.memory_current INCLUDING ALL)",
		"CREATE TABLE IF NOT EXISTS bench_raw.memory_revisions (LIKE loom.memory_revisions INCLUDING ALL)",
		"CREATE TABLE IF NOT EXISTS bench_raw.revision_keys (LIKE loom.revision_keys INCLUDING ALL)",
		"CREATE TABLE IF NOT EXISTS bench_raw.outbox (LIKE loom.outbox INCLUDING ALL)",
	} {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			b.Fatal(err)
		}
	}
	row := []byte(`{"value": "a raw row of about the size of a memory head", "tags": [], "status": "active"}`)
	key := make([]byte, 32)
	value := make([]byte, 2400) // about a sealed envelope with a 384-dim vector
	for _, spaces := range []int{1, 32} {
		for _, conc := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("namespaces=%d/concurrency=%d", spaces, conc), func(b *testing.B) {
				prefix := testenv.Unique(b, "raw")
				run(b, conc, func(w, i int) error {
					ns := fmt.Sprintf("%s-%d", prefix, i%spaces)
					k := fmt.Sprintf("k%d", i)
					tx, err := pool.Begin(ctx)
					if err != nil {
						return err
					}
					defer tx.Rollback(ctx)
					var seq, version int64
					batch := &pgx.Batch{}
					batch.Queue(`INSERT INTO bench_raw.scope_generations (org, scope, generation) VALUES ('bench', $1, 1)
						ON CONFLICT (org, scope) DO UPDATE SET generation = bench_raw.scope_generations.generation + 1 RETURNING generation`, ns).
						QueryRow(func(r pgx.Row) error { return r.Scan(&seq) })
					batch.Queue(`SELECT coalesce(max(version), 0) FROM (SELECT version FROM bench_raw.memory_current
						WHERE org = 'bench' AND namespace = $1 AND agent = '-' AND user_id = '-' AND session_id = '-' AND memory_key = $2 FOR UPDATE) h`, ns, k).
						QueryRow(func(r pgx.Row) error { return r.Scan(&version) })
					if err := tx.SendBatch(ctx, batch).Close(); err != nil {
						return err
					}
					batch = &pgx.Batch{}
					batch.Queue(`INSERT INTO bench_raw.memory_current VALUES ('bench', $1, '-', '-', '-', $2, gen_random_uuid(), $3, $4, 'sha', $5)
						ON CONFLICT (org, namespace, agent, user_id, session_id, memory_key) DO UPDATE SET version = EXCLUDED.version, row = EXCLUDED.row`,
						ns, k, time.Now().UnixNano(), seq, row)
					batch.Queue(`INSERT INTO bench_raw.memory_revisions (org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key,
						memory_id, version, content_sha256, status, row, audit) VALUES ('bench', $1, $2, 'memory.written', 'memory.set', '-', '-', '-', $3,
						gen_random_uuid(), $4, 'sha', 'active', $5, '{}')`, ns, seq, k, time.Now().UnixNano(), row)
					batch.Queue(`INSERT INTO bench_raw.revision_keys (org, namespace, seq, data_key) VALUES ('bench', $1, $2, $3)`, ns, seq, key)
					batch.Queue(`INSERT INTO bench_raw.outbox (org, namespace, seq, topic, record_key, headers, value)
						VALUES ('bench', $1, $2, 't', $3, '[]', $4)`, ns, seq, []byte(ns), value)
					batch.Queue(`SELECT pg_notify('bench_raw', '')`)
					if err := tx.SendBatch(ctx, batch).Close(); err != nil {
						return err
					}
					return tx.Commit(ctx)
				})
			})
		}
	}
}
