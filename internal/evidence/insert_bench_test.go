package evidence

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/loomplane/loom/internal/pgtest"
)

// BenchmarkInsertTurns measures the insert of a memory.set_from_messages-sized batch
// of turns (32, one user) as QueueInsert sends it, which names the batch's user once
// (namedUsers) and its agent and session once by reference (writerRefs), against the
// statement before migration 176, which stored them in the clear (clearInsert), and
// the one before that, which called loom.named_user once a row (perRowInsert). pg_cpu_us/op is the Postgres
// backend's CPU time (user and system, from /proc) per batch: what the change saves,
// less noisy than the round trip on a shared machine.
func BenchmarkInsertTurns(b *testing.B) {
	pool := benchPool(b)
	for _, form := range []struct {
		name  string
		queue func(*pgx.Batch, []Turn)
	}{{"per_user", QueueInsert}, {"per_user_clear", clearInsert}, {"per_row", perRowInsert}} {
		b.Run(form.name, func(b *testing.B) {
			conn, err := pool.Acquire(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Release()
			var backend int
			if err := conn.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
				b.Fatal(err)
			}
			before := backendCPU(b, backend)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				batch := &pgx.Batch{}
				form.queue(batch, benchTurns(b, 32))
				if err := conn.SendBatch(context.Background(), batch).Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((backendCPU(b, backend)-before).Microseconds())/float64(b.N), "pg_cpu_us/op")
		})
	}
}

// clearInsert is QueueInsert's statement before migration 176: the batch's user named
// once, its agent and session stored in the clear (QueueInsert names each distinct
// agent and session once by reference, writerRefs).
func clearInsert(b *pgx.Batch, turns []Turn) {
	n := len(turns)
	orgs, nss, ids, agents, users, sessions, roles := make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n)
	indexes, seqs, ats, sources := make([]int64, n), make([]int64, n), make([]time.Time, n), make([]string, n)
	keys, sealed, terms := make([][]byte, n), make([][]byte, n), make([]*string, n)
	for i, t := range turns {
		orgs[i], nss[i], ids[i], agents[i], users[i], sessions[i], roles[i] = t.Org, t.Namespace, t.TurnID, t.Agent, t.UserID, t.SessionID, t.Role
		indexes[i], seqs[i], ats[i], sources[i] = int64(t.MessageIndex), t.Seq, t.OccurredAt, t.Source
		keys[i], sealed[i], terms[i] = t.DataKey, t.Sealed, termsLiteral(t.Terms)
	}
	b.Queue(`WITH t AS (SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[],
			$9::timestamptz[], $10::bigint[], $11::text[], $12::bytea[], $13::bytea[], $14::text[])
			AS t(org, namespace, turn_id, agent, user_id, session_id, role, message_index, occurred_at, seq, source, data_key, sealed, terms))`+namedUsers+`
		INSERT INTO loom.memory_evidence (org, namespace, turn_id, agent, user_id, session_id, role, message_index,
			occurred_at, seq, source, data_key, sealed, terms)
		SELECT t.org, t.namespace, t.turn_id, t.agent, n.ref, t.session_id, t.role, t.message_index, t.occurred_at, t.seq,
			t.source, t.data_key, t.sealed, t.terms::bigint[]
		FROM t JOIN n ON n.org = t.org AND n.user_id = t.user_id`,
		orgs, nss, ids, agents, users, sessions, roles, indexes, ats, seqs, sources, keys, sealed, terms)
}

// perRowInsert is QueueInsert's statement before namedUsers: loom.named_user once a row.
func perRowInsert(b *pgx.Batch, turns []Turn) {
	n := len(turns)
	orgs, nss, ids, agents, users, sessions, roles := make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n)
	indexes, seqs, ats, sources := make([]int64, n), make([]int64, n), make([]time.Time, n), make([]string, n)
	keys, sealed, terms := make([][]byte, n), make([][]byte, n), make([]*string, n)
	for i, t := range turns {
		orgs[i], nss[i], ids[i], agents[i], users[i], sessions[i], roles[i] = t.Org, t.Namespace, t.TurnID, t.Agent, t.UserID, t.SessionID, t.Role
		indexes[i], seqs[i], ats[i], sources[i] = int64(t.MessageIndex), t.Seq, t.OccurredAt, t.Source
		keys[i], sealed[i], terms[i] = t.DataKey, t.Sealed, termsLiteral(t.Terms)
	}
	b.Queue(`INSERT INTO loom.memory_evidence (org, namespace, turn_id, agent, user_id, session_id, role, message_index,
			occurred_at, seq, source, data_key, sealed, terms)
		SELECT t.org, t.namespace, t.turn_id, t.agent, loom.named_user(t.org, t.user_id), t.session_id, t.role, t.message_index, t.occurred_at, t.seq,
			t.source, t.data_key, t.sealed, t.terms::bigint[]
		FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[],
			$9::timestamptz[], $10::bigint[], $11::text[], $12::bytea[], $13::bytea[], $14::text[])
			AS t(org, namespace, turn_id, agent, user_id, session_id, role, message_index, occurred_at, seq, source, data_key, sealed, terms)`,
		orgs, nss, ids, agents, users, sessions, roles, indexes, ats, seqs, sources, keys, sealed, terms)
}

// benchTurns is a session of n turns of one user, as a from-messages request keeps.
func benchTurns(b *testing.B, n int) []Turn {
	session := uuid.NewString()
	turns := make([]Turn, n)
	for i := range turns {
		key, sealed := make([]byte, 89), make([]byte, 96)
		if _, err := rand.Read(key); err != nil {
			b.Fatal(err)
		}
		rand.Read(sealed)
		turns[i] = Turn{Org: "bench", Namespace: "turns", TurnID: uuid.NewString(), Agent: "bench-agent", UserID: "bench-user", SessionID: session,
			Role: "user", MessageIndex: i, OccurredAt: time.Now(), Seq: int64(i + 1), Source: "extraction", DataKey: key, Sealed: sealed,
			Terms: []int64{int64(i), int64(i) * 7}}
	}
	return turns
}

// benchPool is a fresh database of the package's Postgres, migrated, with the org's user
// reference key made.
func benchPool(b *testing.B) *pgxpool.Pool {
	return pgtest.Migrated(b, postgres, "bench")
}

// backendCPU is a Postgres backend's CPU time so far (utime + stime of /proc/pid/stat).
func backendCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatalf("read the backend's CPU time: %v", err)
	}
	// The fields after the command's closing parenthesis: state is field 3, utime 14.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parse %s: %v %v", raw, err1, err2)
	}
	const ticks = 100 // USER_HZ
	return time.Duration(utime+stime) * time.Second / ticks
}
