package devstack

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A stack started twice over one directory keeps what was written to each store.
func TestStackKeepsDataAcrossRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := Options{Dir: dir, Topics: []string{"devstack.test"}, Partitions: 2, Log: testWriter{t}}

	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			s.Stop()
		}
	}()
	pg, err := pgx.Connect(ctx, s.Postgres.DSN())
	if err != nil {
		t.Fatalf("connect postgres: %v", err)
	}
	if _, err := pg.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('pg-row')"); err != nil {
		t.Fatalf("write postgres: %v", err)
	}
	pg.Close(ctx)
	ch, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.ClickHouse.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Exec(ctx, "CREATE TABLE default.kept (v String) ENGINE = MergeTree ORDER BY v"); err != nil {
		t.Fatal(err)
	}
	// 18.16 hangs on an INSERT ... VALUES sent through Exec: inserts go through a batch with a column list.
	batch, err := ch.PrepareBatch(ctx, "INSERT INTO default.kept (v)")
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append("ch-row"); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatalf("insert: %v", err)
	}
	ch.Close()
	kc, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	if err := kc.ProduceSync(ctx, &kgo.Record{Topic: "devstack.test", Key: []byte("k"), Value: []byte("kafka-record")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	kc.Close()
	stopped = true
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}

	s, err = Start(ctx, opts)
	if err != nil {
		t.Fatalf("second start: %v", err)
	}
	defer s.Stop()
	pg, err = pgx.Connect(ctx, s.Postgres.DSN())
	if err != nil {
		t.Fatal(err)
	}
	var v string
	if err := pg.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "pg-row" {
		t.Fatalf("postgres row after restart: %q, %v", v, err)
	}
	pg.Close(ctx)
	ch, err = clickhouse.Open(&clickhouse.Options{Addr: []string{s.ClickHouse.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueryRow(ctx, "SELECT v FROM default.kept").Scan(&v); err != nil || v != "ch-row" {
		t.Fatalf("clickhouse row after restart: %q, %v", v, err)
	}
	ch.Close()
	kc, err = kgo.NewClient(kgo.SeedBrokers(s.Kafka.Brokers()...), kgo.ConsumeTopics("devstack.test"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	fetches := kc.PollFetches(ctx)
	if errs := fetches.Errors(); len(errs) > 0 {
		t.Fatalf("poll: %v", errs)
	}
	recs := fetches.Records()
	if len(recs) != 1 || string(recs[0].Value) != "kafka-record" {
		t.Fatalf("kafka records after restart: %d", len(recs))
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(b))
	return len(b), nil
}

// A stack with a synchronous standby: a commit on the primary is on the standby when it
// returns, and the primary waits for the standby, named in synchronous_standby_names.
func TestSyncStandbyReceivesEveryCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{SyncStandby: true, SkipClickHouse: true, SkipKafka: true, Log: testWriter{t}})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer s.Stop()
	primary, err := pgx.Connect(ctx, s.Postgres.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close(ctx)
	var names, state string
	if err := primary.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names'),
		(SELECT sync_state FROM pg_stat_replication WHERE application_name = $1)`, StandbyName).Scan(&names, &state); err != nil {
		t.Fatal(err)
	}
	if names != StandbyName || state != "sync" {
		t.Fatalf("synchronous_standby_names %q, standby state %q; want %s streaming in sync", names, state, StandbyName)
	}
	if _, err := primary.Exec(ctx, "CREATE TABLE replicated (v text); INSERT INTO replicated VALUES ('committed')"); err != nil {
		t.Fatal(err)
	}
	standby, err := pgx.Connect(ctx, s.Standby.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Close(ctx)
	// remote_apply is not asked for, so the row may be flushed on the standby and not
	// yet replayed: wait for the replay, never for the commit.
	var v string
	deadline := time.Now().Add(30 * time.Second)
	for standby.QueryRow(ctx, "SELECT v FROM replicated").Scan(&v); v != "committed"; standby.QueryRow(ctx, "SELECT v FROM replicated").Scan(&v) {
		if time.Now().After(deadline) {
			t.Fatal("the standby never replayed the primary's commit")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var inRecovery bool
	if err := standby.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil || !inRecovery {
		t.Fatalf("the standby is not in recovery (%v): it is not a standby", err)
	}
}
