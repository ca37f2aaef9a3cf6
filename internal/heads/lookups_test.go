package heads

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pgtest"
)

var postgres *devstack.Postgres

func TestMain(m *testing.M) { os.Exit(devstack.RunWithPostgres(m.Run, &postgres)) }

// migratedDB is a fresh database with Loom's schema, its heads table left unanalysed as
// in a new deployment's first minute.
func migratedDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.Migrated(t, postgres, "acme")
	if _, err := pool.Exec(context.Background(), "ALTER TABLE loom.memory_current SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	return pool
}

func insertHeads(t *testing.T, pool *pgxpool.Pool, ns, user string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		r := memrow.Row{Identity: memrow.Identity{Org: "acme", Namespace: ns, Agent: "-", UserID: user, SessionID: "-", MemoryKey: fmt.Sprintf("k%d", i)},
			MemoryID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Version: 1, Seq: int64(i), Status: memrow.StatusActive,
			Value: json.RawMessage(fmt.Sprintf(`"value %d"`, i)), ContentSHA256: fmt.Sprintf("sha-%s-%d", user, i)}
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(context.Background(), `INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id,
			memory_key, memory_id, version, seq, content_sha256, row) VALUES ($1, $2, $3, loom.named_user($1, $4), $5, loom.key_ref($1, $6), $7, 1, $8, $9, $10)`,
			r.Org, r.Namespace, r.Agent, r.UserID, r.SessionID, r.MemoryKey, r.MemoryID, r.Seq, r.ContentSHA256, raw); err != nil {
			t.Fatal(err)
		}
	}
}

// A head lookup reads what it names and no more of the namespace, even under a plan made
// while the namespace held three heads and kept as it grew to two thousand: memory.set
// runs these for every write and search for every page, so one that filters the
// namespace's heads per key makes both slower with every memory stored.
func TestHeadLookupsReadOnlyTheKeysTheyName(t *testing.T) {
	ctx := context.Background()
	pool := migratedDB(t)
	insertHeads(t, pool, "grows", "alice", 0, 3)
	// Scopes with a content hash key: WithContent hashes each value under each (the
	// heads here hold plain hashes, as rows written before migration 101 do).
	if _, err := pool.Exec(ctx, `INSERT INTO loom.content_keys (org, namespace, user_id, key)
		VALUES ('acme', 'grows', loom.named_user('acme', 'alice'), gen_random_bytes(32)),
			('acme', 'grows', loom.named_user('acme', 'bob'), gen_random_bytes(32))`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	lookups := []struct {
		name, params, sql string
		args              string // the EXECUTE arguments after org and namespace
		want              int    // heads found
	}{
		{"Many", "text, text, text[], text[], text[], text[]", manySQL, `'{-,-,-}', '{alice,alice,bob}', '{-,-,-}', '{k1,k1500,k1}'`, 2},
		{"WithKeys", "text, text, text[]", WithKeysSQL, `'{k2,k1999,absent}'`, 2},
		{"WithKeyRefs", "text, text, text[]", WithKeyRefsSQL, `loom.key_refs('acme', '{k2,k1999,absent}')`, 2},
		{"WithContent", "text, text, text[], text[]", WithContentSQL, `'{alice,bob}', '{sha-alice-7,sha-alice-1200,sha-bob-1}'`, 2},
		{"InNamespaceWithIDs", "text, text, uuid[]", withIDsSQL,
			`'{00000000-0000-0000-0000-000000000004,00000000-0000-0000-0000-000000001800,00000000-0000-0000-0000-999999999999}'`, 2},
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		exec("SET plan_cache_mode = " + mode)
		// Each statement is prepared and run while the namespace is small and kept
		// cached, as a long-lived pool connection keeps it.
		for i, l := range lookups {
			exec(fmt.Sprintf("PREPARE %s_%d(%s) AS %s", mode, i, l.params, l.sql))
			for range 6 {
				exec(fmt.Sprintf("EXECUTE %s_%d('acme', 'grows', %s)", mode, i, l.args))
			}
		}
		if mode == "force_generic_plan" {
			insertHeads(t, pool, "grows", "alice", 3, 2000)
		}
		for i, l := range lookups {
			var raw []byte
			if err := conn.QueryRow(ctx, fmt.Sprintf("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE %s_%d('acme', 'grows', %s)", mode, i, l.args)).Scan(&raw); err != nil {
				t.Fatalf("%s: explain: %v", l.name, err)
			}
			var plan []struct{ Plan planNode }
			if err := json.Unmarshal(raw, &plan); err != nil {
				t.Fatal(err)
			}
			// Rows per loop are rounded in EXPLAIN's output: the heads found are the
			// root's rows, the heads read an upper bound.
			if found, read := int(plan[0].Plan.ActualRows), plan[0].Plan.headsRead(); found != l.want || read > 3 {
				t.Errorf("%s (%s): found %d heads reading %d of the namespace's 2,000; want %d found reading at most one a key:\n%s",
					l.name, mode, found, read, l.want, raw)
			}
		}
	}

	// What Many answers: the heads of the identities named, by IdentityKey, none for an
	// identity without one.
	ids := []memrow.Identity{
		{Org: "acme", Namespace: "grows", Agent: "-", UserID: "alice", SessionID: "-", MemoryKey: "k1"},
		{Org: "acme", Namespace: "grows", Agent: "-", UserID: "alice", SessionID: "-", MemoryKey: "k1999"},
		{Org: "acme", Namespace: "grows", Agent: "-", UserID: "bob", SessionID: "-", MemoryKey: "k1"},
	}
	got, err := Many(ctx, pool, "acme", "grows", ids)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k, h := range got {
		if k != IdentityKey(h.Identity) {
			t.Errorf("head %+v under key %q", h.Identity, k)
		}
		keys = append(keys, h.UserID+"/"+h.MemoryKey)
	}
	sort.Strings(keys)
	if strings.Join(keys, " ") != "alice/k1 alice/k1999" {
		t.Fatalf("Many found %v, want alice/k1 alice/k1999", keys)
	}
}

type planNode struct {
	NodeType      string     `json:"Node Type"`
	Relation      string     `json:"Relation Name"`
	ActualRows    float64    `json:"Actual Rows"`
	ActualLoops   float64    `json:"Actual Loops"`
	RemovedFilter float64    `json:"Rows Removed by Filter"`
	Plans         []planNode `json:"Plans"`
}

// headsRead sums the heads the plan's scans of memory_current read, returned or
// filtered out.
func (n planNode) headsRead() int {
	read := 0
	if n.Relation == "memory_current" {
		read = int((n.ActualRows + n.RemovedFilter) * n.ActualLoops)
	}
	for _, c := range n.Plans {
		read += c.headsRead()
	}
	return read
}
