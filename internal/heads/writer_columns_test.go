package heads

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pgtest"
)

// writerReads reads id's head (and revision) back through every kind of read that
// binds or answers an agent or a session, and fails unless each answers id whole.
func writerReads(t *testing.T, pool *pgxpool.Pool, id memrow.Identity) {
	t.Helper()
	ctx := context.Background()
	check := func(how string, rows ...*memrow.Row) {
		t.Helper()
		if len(rows) != 1 || rows[0] == nil || rows[0].Identity != id {
			for _, r := range rows {
				if r != nil {
					t.Errorf("%s read %+v", how, r.Identity)
				}
			}
			t.Fatalf("%s read %d heads, want one of %+v", how, len(rows), id)
		}
	}
	headReads(t, pool, id, check)
	opened := map[string]*memrow.Row{}
	var unnamed Unnamed
	b := &pgx.Batch{}
	QueueManyOpened(b, nil, &unnamed, opened, id.Org, id.Namespace, []memrow.Identity{id})
	var version, seq int64
	QueueLock(b, id, &version, &seq)
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if err := unnamed.Name(ctx, pool); err != nil {
		t.Fatal(err)
	}
	check("ManyOpened (opened in Go)", opened[IdentityKey(id)])
	if version != 1 {
		t.Fatalf("QueueLock read version %d of the head, want 1", version)
	}
	// Narrowed by agent, by session, by both: the scope binds each clear value's reference.
	for _, sc := range []Scope{{Agent: id.Agent}, {SessionID: id.SessionID}, {Agent: id.Agent, UserID: id.UserID, SessionID: id.SessionID}} {
		sc.Org, sc.Namespace = id.Org, id.Namespace
		unlocked, err := Unlocked(ctx, pool, sc, 10)
		if err != nil {
			t.Fatal(err)
		}
		check("Unlocked", unlocked...)
		named, err := Naming(ctx, pool, sc, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		check("Naming", named...)
		_, total, err := Aggregate(ctx, pool, sc, []string{ByStatus}, 10)
		if err != nil || total != 1 {
			t.Fatalf("Aggregate of %+v counted %d heads (%v), want 1", sc, total, err)
		}
	}
	if other, err := InOtherSessions(ctx, pool, id); err != nil || len(other) != 0 {
		t.Fatalf("InOtherSessions read %d heads (%v): the head's own session is not another", len(other), err)
	}
}

// A memory row's agent and session are stored by their references (migration 173):
// the agent and session_id columns of memory_current and memory_revisions (so their
// primary key and memory_revisions_by_key) hold loom.agent_ref's and
// loom.session_ref's, the row's JSON neither, and the clear values are in the sealed
// text alone; every read answers them.
func TestAStoredRowHoldsItsAgentAndSessionOnlySealed(t *testing.T) {
	ctx := context.Background()
	pool := migratedDB(t)
	const clearAgent, clearSession = "planner-clear-agent", "sess-clear-session"
	id := memrow.Identity{Org: "acme", Namespace: "writers", Agent: clearAgent, UserID: "alice", SessionID: clearSession, MemoryKey: "k"}
	r := &memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-000000000001", Version: 1, Seq: 1,
		Status: memrow.StatusActive, Value: json.RawMessage(`"the plan"`)}
	payload, sealed, key := sealedAtRest(t, r)
	// As the commit writes them (command: queueHeadWrite, queueRevision).
	for _, q := range []string{
		`INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
			content_sha256, row, sealed) SELECT $1, $2, w.r[2], loom.named_user($1, $4), w.r[3], w.r[1], $7, 1, 1, '', $8, $9
			FROM (SELECT loom.writer_refs($1, $6, $3, $5) AS r OFFSET 0) w`,
		`INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key,
			memory_id, version, content_sha256, status, row, audit, sealed) SELECT $1, $2, 1, 'memory.written', 'memory.set', w.r[2],
			loom.named_user($1, $4), w.r[3], w.r[1], $7, 1, '', 'active', $8, '{}', $9
			FROM (SELECT loom.writer_refs($1, $6, $3, $5) AS r OFFSET 0) w`,
	} {
		if _, err := pool.Exec(ctx, q, id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, r.MemoryID, payload, sealed); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, 1, $3)`, id.Org, id.Namespace, key); err != nil {
		t.Fatal(err)
	}
	agentRef, sessionRef := pgtest.WriterRefs(t, pool, id.Org, clearAgent, clearSession)
	var clear, referenced int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM loom.memory_current WHERE strpos(agent || session_id || row::text || encode(sealed, 'escape'), $1) > 0
			OR strpos(agent || session_id || row::text || encode(sealed, 'escape'), $2) > 0)
		+ (SELECT count(*) FROM loom.memory_revisions WHERE strpos(agent || session_id || row::text || audit::text || encode(sealed, 'escape'), $1) > 0
			OR strpos(agent || session_id || row::text || audit::text || encode(sealed, 'escape'), $2) > 0),
		(SELECT count(*) FROM loom.memory_current WHERE agent = $3 AND session_id = $4)
		+ (SELECT count(*) FROM loom.memory_revisions WHERE agent = $3 AND session_id = $4)`,
		clearAgent, clearSession, agentRef, sessionRef).Scan(&clear, &referenced); err != nil {
		t.Fatal(err)
	}
	if clear != 0 || referenced != 2 {
		t.Fatalf("%d rows hold the agent or the session in the clear, %d of 2 both by their references", clear, referenced)
	}
	writerReads(t, pool, id)
}

// Rows a Loom before migration 173 stored hold their agent and session in the columns
// and in their JSON, not in their sealed text. The migration rewrites the columns to
// the references ("-" stays) and leaves the JSON, so each row reads as before.
func TestMigrationStoresExistingAgentsAndSessionsByReference(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.MigratedBefore(t, postgres, "173")
	if _, err := pool.Exec(ctx, `INSERT INTO loom.user_ref_keys (org, key) VALUES ('acme', gen_random_bytes(32))`); err != nil {
		t.Fatal(err)
	}
	ids := []memrow.Identity{
		{Org: "acme", Namespace: "old", Agent: "old-agent", UserID: "alice", SessionID: "old-session", MemoryKey: "k1"},
		{Org: "acme", Namespace: "old-none", Agent: "-", UserID: "-", SessionID: "-", MemoryKey: "k2"},
	}
	for i, id := range ids {
		r := memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-00000000000" + string(rune('1'+i)), Version: 1, Seq: int64(i + 1),
			Status: memrow.StatusActive, Value: json.RawMessage(`"old value"`)}
		key, err := events.NewDataKey()
		if err != nil {
			t.Fatal(err)
		}
		// Sealed as before: the text holds the user and the key, not the agent or the
		// session, which the JSON holds.
		bare := r
		bare.Agent, bare.SessionID = "", ""
		_, sealed, err := AtRest(&bare, key)
		if err != nil {
			t.Fatal(err)
		}
		whole := memrow.Row{Identity: id, MemoryID: r.MemoryID, Version: 1, Seq: r.Seq, Status: memrow.StatusActive}
		whole.MemoryKey = ""
		if id.UserID != memrow.DefaultIdentity {
			whole.UserID = ""
		}
		payload, err := json.Marshal(whole)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
				content_sha256, row, sealed) VALUES ($1, $2, $3, loom.named_user($1, $4), $5, loom.key_ref($1, $6), $7, 1, $10, '', $8, $9)`,
			`INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key,
				memory_id, version, content_sha256, status, row, audit, sealed) VALUES ($1, $2, $10, 'memory.written', 'memory.set', $3,
				loom.named_user($1, $4), $5, loom.key_ref($1, $6), $7, 1, '', 'active', $8, '{}', $9)`,
		} {
			if _, err := pool.Exec(ctx, q, id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, r.MemoryID, payload, sealed, r.Seq); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if _, err := pool.Exec(ctx, `INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, $3, $4)`, id.Org, id.Namespace, r.Seq, key); err != nil {
			t.Fatal(err)
		}
	}

	pgtest.MigrateRest(t, pool)
	for _, id := range ids {
		agentRef, sessionRef := pgtest.WriterRefs(t, pool, id.Org, id.Agent, id.SessionID)
		if id.Agent != memrow.DefaultIdentity && (agentRef == id.Agent || sessionRef == id.SessionID) {
			t.Fatalf("%+v: the references are the clear values", id)
		}
		var referenced int
		if err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM loom.memory_current WHERE org = $1 AND agent = $2 AND session_id = $3 AND memory_key = loom.key_ref($1, $4))
			+ (SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND agent = $2 AND session_id = $3 AND memory_key = loom.key_ref($1, $4))`,
			id.Org, agentRef, sessionRef, id.MemoryKey).Scan(&referenced); err != nil {
			t.Fatal(err)
		}
		if referenced != 2 {
			t.Fatalf("%+v: %d of 2 rows hold the agent's and the session's references", id, referenced)
		}
	}
	for _, id := range ids {
		writerReads(t, pool, id)
	}
}

// A read narrowed by an agent or a session names each once a statement, not once a head
// it looks at, and a lookup of one identity unwraps the org's key once for its key,
// agent and session (loom.writer_refs). Counted by Postgres's function statistics.
func TestAScanOfAnAgentsHeadsBindsItsReferencesOnce(t *testing.T) {
	ctx := context.Background()
	pool := migratedDB(t)
	for i := range 200 {
		id := memrow.Identity{Org: "acme", Namespace: "many", Agent: []string{"planner", "coder"}[i%2], UserID: "alice",
			SessionID: []string{"s1", "s2"}[i%2], MemoryKey: "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))}
		r := &memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-000000000001", Version: 1, Seq: int64(i + 1), Status: memrow.StatusActive}
		payload, sealed, _ := sealedAtRest(t, r)
		if _, err := pool.Exec(ctx, `INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
			content_sha256, row, sealed) SELECT $1, $2, w.r[2], loom.named_user($1, $4), w.r[3], w.r[1], $7, 1, $10, '', $8, $9
			FROM (SELECT loom.writer_refs($1, $6, $3, $5) AS r OFFSET 0) w`,
			id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, r.MemoryID, payload, sealed, r.Seq); err != nil {
			t.Fatal(err)
		}
	}
	tx, calls := seqScanCounting(t, pool)
	sc := Scope{Org: "acme", Namespace: "many", Agent: "planner", SessionID: "s1"}
	if rows, err := Unlocked(ctx, tx, sc, 500); err != nil || len(rows) != 100 {
		t.Fatalf("the planner's unlocked heads in s1: %d, %v; want 100", len(rows), err)
	}
	if _, err := CountLocked(ctx, tx, sc); err != nil {
		t.Fatal(err)
	}
	// Function statistics count a call of a function the planner does not inline.
	if n := calls("agent_ref") + calls("session_ref"); n > 4 {
		t.Errorf("loom.agent_ref and loom.session_ref ran %d times for 2 statements over 200 heads; want once each a statement", n)
	}
	id := memrow.Identity{Org: "acme", Namespace: "many", Agent: "planner", UserID: "alice", SessionID: "s1", MemoryKey: "kaa"}
	// A read of one head is Many's lookup of one identity (loom.identity_refs, under
	// every live generation of the org's key: migration 182), the key unwrapped once.
	before, unwrapped := calls("writer_refs")+calls("user_ref"), calls("unwrapped_key")
	if head, err := Read(ctx, tx, id); err != nil || head == nil {
		t.Fatalf("read %+v: %v, %v", id, head, err)
	}
	if n := calls("writer_refs") + calls("user_ref") - before; n != 0 {
		t.Errorf("a read of one head ran loom.writer_refs and loom.user_ref %d times, want none", n)
	}
	if n := calls("unwrapped_key") - unwrapped; n != 2 {
		t.Errorf("a read of one head unwrapped keys %d times, want twice (the org's key, the row's data key)", n)
	}
	if n := calls("key_ref"); n != 0 {
		t.Errorf("loom.key_ref ran %d times: the key's reference is writer_refs'", n)
	}
	// A lookup of many identities unwraps the org's key once for all of them
	// (loom.identity_refs), not twice an identity (writer_refs and user_ref each).
	var ids []memrow.Identity
	for i := range 50 {
		ids = append(ids, memrow.Identity{Org: "acme", Namespace: "many", Agent: []string{"planner", "coder"}[i%2], UserID: "alice",
			SessionID: []string{"s1", "s2"}[i%2], MemoryKey: "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	perIdentity := func() int64 { return calls("writer_refs") + calls("user_ref") }
	before = perIdentity()
	rows, err := tx.Query(ctx, manySQL, manyArgs("acme", "many", ids)...)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for rows.Next() {
		found++
	}
	if rows.Close(); rows.Err() != nil || found != 50 {
		t.Fatalf("Many's read found %d of 50 heads: %v", found, rows.Err())
	}
	if n := perIdentity() - before; n != 0 {
		t.Errorf("a lookup of 50 heads ran loom.writer_refs and loom.user_ref %d times, each unwrapping the org's key; want none", n)
	}
}
