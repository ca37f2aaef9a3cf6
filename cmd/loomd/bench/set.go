package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/watermarks"
)

// set measures memory.set over HTTP (verdict against the namespace's peers, admission,
// the Postgres commit; relay and projector running) at each concurrency, into one
// namespace and spread over 32, each case beside the same Postgres transaction
// issued directly with pgx.
func (r *runner) set(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title: "memory.set latency and writes/s",
		Baseline: "the transaction memory.set commits (generation advance, head lock and upsert, revision, " +
			"data key, outbox row, NOTIFY), issued directly with pgx into copies of the tables, at the same concurrency " +
			"and over as many namespaces",
		Notes: []string{"namespaces use the default conflict policy: each write is judged against its peers; " +
			"values are drawn from a made-up vocabulary, so they are not each other's peers",
			"WAL bytes/write: what Postgres wrote to its WAL during the run (Loom's until the relay deleted what the run queued), " +
				"divided by the writes answered"},
	}
	raw, err := r.rawCommitter(ctx)
	if err != nil {
		return nil, err
	}
	defer raw.pool.Close()
	for _, spaces := range []int{1, 32} {
		for _, conc := range r.levels(1, 8, 32) {
			if err := r.setCase(ctx, res, raw, spaces, conc); err != nil {
				return nil, err
			}
		}
	}
	res.Notes = append(res.Notes, "CPU ms/write: CPU time from the load's start until the projection holds its last write "+
		"(the baseline's: its run), over the writes answered; loomd is this process (the API, the relay, the projector, the "+
		"index and the benchmark's own client), read with getrusage, the stores from /proc at 10 ms a tick",
		"Postgres round trips/write: the statements and batches loomd's pool sent (every role: the write, the relay, the "+
			"projector's watermarks, the index's key reads, the workers) from the load's start until the projection holds its "+
			"last write, over the writes answered; the baseline's are its own pool's")
	return res, nil
}

// setCase measures one case of the set scenario, Loom then the baseline.
func (r *runner) setCase(ctx context.Context, res *ScenarioResult, raw *rawCommitter, spaces, conc int) error {
	name := fmt.Sprintf("namespaces=%d concurrency=%d", spaces, conc)
	wal := walMeter{pool: raw.pool}
	wal.mark(ctx)
	loomCost := r.costMark(r.t.RoundTrips)
	census := r.t.RoundTrips.Census()
	prefix := r.namespace("set", fmt.Sprint(spaces), fmt.Sprint(conc))
	loom, err := r.setLoad(ctx, "memory.set "+name, prefix, spaces, conc, r.opts.Duration)
	if err != nil {
		return err
	}
	wal.drainOutbox(ctx)
	loomWAL := wal.mark(ctx)
	if err := r.waitSpacesProjected(ctx, raw.pool, prefix, spaces); err != nil {
		return err
	}
	loomSpent := loomCost.since(r)
	writeCensus(r.opts.Progress, "memory.set "+name, census, r.t.RoundTrips.Census(), loom.Calls)
	wal.mark(ctx)
	rawCost := r.costMark(raw.trips)
	rawPrefix := r.namespace("raw", fmt.Sprint(spaces), fmt.Sprint(conc))
	base, err := r.closedLoop(ctx, "raw commit "+name, conc, r.opts.Duration, func(ctx context.Context, _, i int) error {
		return raw.commit(ctx, fmt.Sprintf("%s-%d", rawPrefix, i%spaces), fmt.Sprintf("k%d", i))
	})
	if err != nil {
		return err
	}
	rawSpent := rawCost.since(r)
	rawWAL := wal.mark(ctx)
	res.compare(name, loom, base, "writes/s")
	if loom.Calls == 0 || base.Calls == 0 {
		return nil
	}
	if wal.err == nil {
		res.add(name, "WAL bytes/write", round(loomWAL/float64(loom.Calls), 0), round(rawWAL/float64(base.Calls), 0))
	}
	l, b := loomSpent.per(loom.Calls), rawSpent.per(base.Calls)
	res.add(name, "CPU ms/write, loomd", l.self, b.self)
	res.add(name, "CPU ms/write, Postgres", l.postgres, b.postgres)
	res.add(name, "CPU ms/write, ClickHouse", l.clickhouse, b.clickhouse)
	res.add(name, "Postgres round trips/write", l.trips, b.trips)
	if r.opts.SetKeyed && spaces == 1 {
		return r.setKeyedCase(ctx, res, raw, base, conc)
	}
	return nil
}

// waitSpacesProjected waits until the projection holds every write of namespaces
// prefix-0..spaces-1, reading through pool (the baseline's), so loomd's round trips
// count none of the waiting's.
func (r *runner) waitSpacesProjected(ctx context.Context, pool *pgxpool.Pool, prefix string, spaces int) error {
	for i := 0; i < spaces; i++ {
		ns := fmt.Sprintf("%s-%d", prefix, i)
		err := r.waitUntil(ctx, "the projection of "+ns, 5*time.Minute, 20*time.Millisecond, func(ctx context.Context) (bool, error) {
			gen, err := generations.Read(ctx, pool, r.t.Org, ns)
			if err != nil {
				return false, err
			}
			mark, err := watermarks.Read(ctx, pool, r.t.Process.Cfg.Pipeline.Projection, r.t.Org, ns)
			return mark >= gen, err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// costMark is what a side of a case had spent at its start: CPU by process, and the
// round trips its pool had sent.
type costMark struct {
	self, stores time.Duration // this process's; the processes under it (the embedded stores)
	cpu          cpuMark
	trips        *RoundTrips
	sent         int64
}

// The walk of /proc that reads the stores' CPU costs this process tens of milliseconds
// on a busy machine (more than memory.set's handler over a 5 s run at c=1, in a CPU
// profile of the set scenario at load 40): a mark walks before it reads this process's
// CPU and since reads it before it walks, so neither walk is counted as the load's.
func (r *runner) costMark(trips *RoundTrips) costMark {
	_, stores := splitTreeCPU(os.Getpid())
	return costMark{self: selfCPU(), stores: stores, cpu: r.cpuNow(), trips: trips, sent: trips.Count()}
}

// spent is what a side cost from its mark on.
type spent struct{ self, postgres, clickhouse, trips float64 }

func (m costMark) since(r *runner) spent {
	self := selfCPU() - m.self
	_, stores := splitTreeCPU(os.Getpid())
	cpu := r.cpuNow()
	ch := cpu.clickhouse - m.cpu.clickhouse
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 }
	// The stores are every process under this one: Postgres and ClickHouse.
	return spent{self: ms(self), postgres: ms(stores - m.stores - ch), clickhouse: ms(ch), trips: float64(m.trips.Count() - m.sent)}
}

// per is the cost per write of n writes, rounded for the report.
func (s spent) per(n int) spent {
	f := float64(n)
	return spent{self: round(s.self/f, 3), postgres: round(s.postgres/f, 3), clickhouse: round(s.clickhouse/f, 3), trips: round(s.trips/f, 2)}
}

// walMeter reads how much Postgres wrote to its WAL between two marks: what a run
// cost the WAL, which load on the machine does not distort as it does a latency.
type walMeter struct {
	pool *pgxpool.Pool
	at   float64
	err  error
}

// mark returns the WAL bytes written since the last mark.
func (w *walMeter) mark(ctx context.Context) float64 {
	var at float64
	if err := w.pool.QueryRow(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::float8`).Scan(&at); err != nil {
		w.err = err
		return 0
	}
	d := at - w.at
	w.at = at
	return d
}

// drainOutbox waits, at most ten seconds, for the relay to publish and delete what the
// run queued, so the run's WAL includes the deletes.
func (w *walMeter) drainOutbox(ctx context.Context) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var n int64
		if err := w.pool.QueryRow(ctx, `SELECT count(*) FROM loom.outbox WHERE parked_at IS NULL`).Scan(&n); err != nil || n == 0 {
			return
		}
	}
}

// setLoad writes new keys with memory.set into namespaces prefix-0..spaces-1 from conc
// workers for d.
func (r *runner) setLoad(ctx context.Context, label, prefix string, spaces, conc int, d time.Duration) (Sample, error) {
	return r.setLoadKeyed(ctx, label, prefix, spaces, conc, d, false)
}

// setLoadKeyed is setLoad; keyed sends each call under its own Idempotency-Key.
func (r *runner) setLoadKeyed(ctx context.Context, label, prefix string, spaces, conc int, d time.Duration, keyed bool) (Sample, error) {
	rands := r.workerRands(conc)
	return r.closedLoop(ctx, label, conc, d, func(ctx context.Context, w, i int) error {
		var opts []client.CallOption
		if keyed {
			opts = append(opts, client.IdempotencyKey(fmt.Sprintf("%s-%d", prefix, i)))
		}
		_, err := r.api.Set(ctx, fmt.Sprintf("%s-%d", prefix, i%spaces), fmt.Sprintf("k%d", i), client.SetRequest{Value: sentence(rands[w])}, opts...)
		return err
	})
}

// rawCommitter issues memory.set's transaction shape with pgx into the scratch schema
// bench_raw: copies of the tables a write touches, indexes included, so the baseline
// pays what Loom's commit pays for the same rows.
type rawCommitter struct {
	pool  *pgxpool.Pool
	trips *RoundTrips
	org   string
	row   []byte // a head of a memory's shape and size
	// sealed and audit are a revision's sealed text and its audit account, of their size.
	sealed, audit []byte
	key           []byte // a data key
	// value, headers and vectors are a revision's outbox record queued by reference: its
	// envelope, CloudEvents headers and sealed vectors (two at 384 dimensions), of their
	// sizes; value and vectors are random, as ciphertext is, so Postgres cannot compress
	// them (a zeroed value was stored in 38 bytes).
	value, headers, vectors []byte
}

// rawTables are the tables memory.set's commit writes.
var rawTables = []string{"scope_generations", "memory_current", "memory_revisions", "revision_keys", "outbox"}

func (r *runner) rawCommitter(ctx context.Context) (*rawCommitter, error) {
	cfg := r.t.Process.Cfg
	// The same session settings (synchronous_commit = on) and pool size as loomd's.
	trips := &RoundTrips{}
	pool, err := pg.Open(ctx, pg.PoolConfig{DSN: cfg.PG.DSN, MaxConns: cfg.PG.PoolMax, Tracer: trips})
	if err != nil {
		return nil, err
	}
	ddl := []string{"CREATE SCHEMA IF NOT EXISTS bench_raw"}
	for _, t := range rawTables {
		ddl = append(ddl, fmt.Sprintf("CREATE TABLE IF NOT EXISTS bench_raw.%s (LIKE loom.%s INCLUDING ALL)", t, t))
	}
	// LIKE copies loom.outbox's STORAGE EXTERNAL (migrations 126, 127) but not its
	// toast_tuple_target: the baseline's record stays in its row, as Loom's does. (Runs
	// before kept a zeroed value with STORAGE EXTENDED, which Postgres compressed away.)
	ddl = append(ddl, "ALTER TABLE bench_raw.outbox ALTER COLUMN value SET STORAGE EXTERNAL",
		"ALTER TABLE bench_raw.outbox SET (toast_tuple_target = 8160)")
	for _, q := range ddl {
		if _, err := pool.Exec(ctx, q); err != nil {
			pool.Close()
			return nil, fmt.Errorf("create the baseline's tables: %s: %w", q, err)
		}
	}
	return &rawCommitter{
		pool:    pool,
		trips:   trips,
		org:     r.t.Org,
		row:     []byte(rawHead),
		sealed:  randomBytes(192),
		audit:   []byte(rawAudit),
		key:     make([]byte, 32),
		value:   randomBytes(905),
		headers: []byte(rawHeaders),
		vectors: randomBytes(3088),
	}, nil
}

// rawHead, rawAudit and rawHeaders are a memory.set's head row, audit account and
// record headers as Loom writes them (a bench write's, hash embedder, no tags).
const (
	rawHead = `{"org": "bench", "seq": 1, "tags": null, "actor": "token:4f83eafe73a4", "agent": "-", "value": null, ` +
		`"locked": false, "pinned": false, "status": "active", "user_id": "-", "version": 1796527687312891727, ` +
		`"entities": null, "memory_id": "e660b5b1-d21a-4ae1-81cd-c9627fd94065", "namespace": "raw", "tombstone": false, ` +
		`"confidence": 1, "created_at": "2026-12-06T03:28:07.312891727Z", "memory_key": "k1001", "session_id": "-", ` +
		`"updated_at": "2026-12-06T03:28:07.312891727Z", "memory_type": "fact", "sensitivity": "normal", ` +
		`"source_class": "direct", "embedding_dim": 384, "content_sha256": "", "embedding_model": "hash-v1-384", ` +
		`"reinforcement_count": 0}`
	rawAudit = `{"op": "memory.set", "actor": "token:4f83eafe73a4", "agent": "-", "pinned": false, "status": "active", ` +
		`"user_id": "-", "verdict": "new", "version": 1796527687312891727, "memory_id": "e660b5b1-d21a-4ae1-81cd-c9627fd94065", ` +
		`"tombstone": false, "event_type": "memory.written", "memory_key": "k1001", "request_id": "", "session_id": "-", ` +
		`"source_class": "direct", "content_sha256": "8f1c349abbad8f5b433a1d9f25fa6b65bf63daadfcbff857f10c307e0b387ebc"}`
	rawHeaders = `[["ce_specversion", "1.0"], ["ce_id", "bench/raw/1"], ["ce_source", "loom"], ["ce_type", "memory.written"], ` +
		`["ce_time", "2026-12-06T03:28:07.202715437Z"], ["ce_subject", "ed90d4a2-ee8f-4703-97d6-16b226a43d00"], ` +
		`["content-type", "application/json"]]`
)

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// commit writes key into ns in one transaction of memory.set's shape, in its two
// round trips: the generation advance with the head lock, then the writes.
func (c *rawCommitter) commit(ctx context.Context, ns, key string) error {
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("raw commit: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	var seq, version int64
	batch := &pgx.Batch{}
	batch.Queue(`INSERT INTO bench_raw.scope_generations (org, scope, generation) VALUES ($1, $2, 1)
		ON CONFLICT (org, scope) DO UPDATE SET generation = bench_raw.scope_generations.generation + 1 RETURNING generation`, c.org, ns).
		QueryRow(func(r pgx.Row) error { return r.Scan(&seq) })
	batch.Queue(`SELECT coalesce(max(version), 0) FROM (SELECT version FROM bench_raw.memory_current
		WHERE org = $1 AND namespace = $2 AND agent = '-' AND user_id = '-' AND session_id = '-' AND memory_key = $3 FOR UPDATE) h`, c.org, ns, key).
		QueryRow(func(r pgx.Row) error { return r.Scan(&version) })
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("raw commit: generation and head: %w", err)
	}
	version = time.Now().UnixNano()
	batch = &pgx.Batch{}
	// A content digest of a digest's length, as Loom's head and revision carry.
	sha := fmt.Sprintf("%064x", version)
	batch.Queue(`INSERT INTO bench_raw.memory_current VALUES ($1, $2, '-', '-', '-', $3, gen_random_uuid(), $4, $5, $7, $6, now(), NULL, $8)
		ON CONFLICT (org, namespace, agent, user_id, session_id, memory_key) DO UPDATE SET version = EXCLUDED.version, row = EXCLUDED.row`,
		c.org, ns, key, version, seq, c.row, sha, c.sealed)
	batch.Queue(`INSERT INTO bench_raw.memory_revisions (org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key,
		memory_id, version, content_sha256, status, row, audit, sealed) VALUES ($1, $2, $3, 'memory.written', 'memory.set', '-', '-', '-', $4,
		gen_random_uuid(), $5, $9, 'active', $6, $7, $8)`, c.org, ns, seq, key, version, c.row, c.audit, c.sealed, sha)
	batch.Queue(`INSERT INTO bench_raw.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, $3, $4)`, c.org, ns, seq, c.key)
	batch.Queue(`INSERT INTO bench_raw.outbox (org, namespace, seq, topic, record_key, headers, value, vectors)
		VALUES ($1, $2, $3, 'loom.memory.revisions.v1', $4, $5, $6, $7)`, c.org, ns, seq, []byte(ns), c.headers, c.value, c.vectors)
	batch.Queue(`SELECT pg_notify('bench_raw', '')`)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("raw commit: writes: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("raw commit: %w", err)
	}
	return nil
}
