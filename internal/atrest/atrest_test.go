package atrest

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pgtest"
)

var postgres *devstack.Postgres

func TestMain(m *testing.M) { os.Exit(devstack.RunWithPostgres(m.Run, &postgres)) }

// storeAs170 stores r's head and revision as a Loom between migrations 155 and 171
// sealed them (the columns rewritten by 171 and 173 since): the sealed text holds
// neither the user, the key, the agent nor the session, the JSON the key, agent and
// session (and the user, when userInJSON), the columns their references.
func storeAs170(t *testing.T, pool *pgxpool.Pool, r memrow.Row, userInJSON bool) {
	t.Helper()
	ctx := context.Background()
	key, err := events.NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	bare := r
	bare.UserID, bare.MemoryKey, bare.Agent, bare.SessionID = "", "", "", ""
	_, sealed, err := heads.AtRest(&bare, key)
	if err != nil {
		t.Fatal(err)
	}
	whole := memrow.Row{Identity: r.Identity, MemoryID: r.MemoryID, Version: r.Version, Seq: r.Seq, Status: r.Status}
	if !userInJSON && r.UserID != memrow.DefaultIdentity {
		whole.UserID = ""
	}
	payload, err := json.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
			content_sha256, row, sealed) VALUES ($1, $2, loom.agent_ref($1, $3), loom.named_user($1, $4), loom.session_ref($1, $5),
			loom.key_ref($1, $6), $7, $8, $8, '', $9, $10)`,
		`INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key,
			memory_id, version, content_sha256, status, row, audit, sealed) VALUES ($1, $2, $8, 'memory.written', 'memory.set',
			loom.agent_ref($1, $3), loom.named_user($1, $4), loom.session_ref($1, $5), loom.key_ref($1, $6), $7, $8, '', 'active', $9, '{}', $10)`,
	} {
		if _, err := pool.Exec(ctx, q, r.Org, r.Namespace, r.Agent, r.UserID, r.SessionID, r.MemoryKey, r.MemoryID, r.Seq, payload, sealed); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, $3, $4)`, r.Org, r.Namespace, r.Seq, key); err != nil {
		t.Fatal(err)
	}
}

// passOver runs step over every page of tables (the memory rows' tables when none),
// as Pass does.
func passOver(t *testing.T, pool *pgxpool.Pool, step func(ctx context.Context, pool *pgxpool.Pool, table string, from, to pgtype.TID) (int64, error), tables ...string) int64 {
	t.Helper()
	if len(tables) == 0 {
		tables = rowTables
	}
	var n int64
	for _, table := range tables {
		if err := walk(context.Background(), pool, table, func(from, to pgtype.TID) error {
			c, err := step(context.Background(), pool, table, from, to)
			n += c
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// rowsHolding counts the memory rows whose `row` JSON holds s.
func rowsHolding(t *testing.T, pool *pgxpool.Pool, s string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM loom.memory_current WHERE strpos(row::text, $1) > 0)
		+ (SELECT count(*) FROM loom.memory_revisions WHERE strpos(row::text, $1) > 0)`, s).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// readsAnswer fails unless every read of id's head and revisions (opened in SQL and
// in Go) answers its key, user, agent, session and value.
func readsAnswer(t *testing.T, pool *pgxpool.Pool, id memrow.Identity, value string) {
	t.Helper()
	ctx := context.Background()
	check := func(how string, r *memrow.Row) {
		t.Helper()
		if r == nil || r.MemoryKey != id.MemoryKey || r.UserID != id.UserID || r.Agent != id.Agent || r.SessionID != id.SessionID ||
			string(r.Value) != value {
			t.Fatalf("%s read %+v; want key %q of %q (agent %q, session %q), value %s", how, r, id.MemoryKey, id.UserID, id.Agent, id.SessionID, value)
		}
	}
	head, err := heads.Read(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	check("Read", head)
	revs, err := heads.KeyRevisions(ctx, pool, id)
	if err != nil || len(revs) != 1 {
		t.Fatalf("KeyRevisions: %d, %v", len(revs), err)
	}
	check("KeyRevisions", revs[0])
	into := map[string]*memrow.Row{}
	var unnamed heads.Unnamed
	b := &pgx.Batch{}
	heads.QueueManyOpened(b, nil, &unnamed, into, id.Org, id.Namespace, []memrow.Identity{id})
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if err := unnamed.Name(ctx, pool); err != nil {
		t.Fatal(err)
	}
	check("QueueManyOpened (opened in Go)", into[heads.IdentityKey(id)])
}

// A row stored before migration 171 keeps its key (and before 173 its agent and
// session) in its `row` JSON; the pass moves them (and a user the JSON still names)
// into the row's sealed text: the JSON holds neither
// after it, every read answers both as before, and a second pass changes nothing.
func TestPassSealsTheKeysOfRowsStoredBeforeMigration171(t *testing.T) {
	pool := pgtest.Migrated(t, postgres, "acme")
	const value = `"the old diagnosis"`
	keyed := memrow.Identity{Org: "acme", Namespace: "old", Agent: "old-agent-170", UserID: "alice-old-user", SessionID: "old-session-170", MemoryKey: "old-clear-key-170"}
	named := memrow.Identity{Org: "acme", Namespace: "old", Agent: "-", UserID: "bob-old-user", SessionID: "-", MemoryKey: "old-named-key-170"}
	anonymous := memrow.Identity{Org: "acme", Namespace: "old", Agent: "-", UserID: "-", SessionID: "-", MemoryKey: "old-anon-key-170"}
	for i, c := range []struct {
		id         memrow.Identity
		userInJSON bool
	}{{keyed, false}, {named, true}, {anonymous, false}} {
		storeAs170(t, pool, memrow.Row{Identity: c.id, MemoryID: "00000000-0000-0000-0000-00000000000" + string(rune('1'+i)),
			Version: 1, Seq: int64(i + 1), Status: memrow.StatusActive, Value: json.RawMessage(value)}, c.userInJSON)
	}
	for _, id := range []memrow.Identity{keyed, named, anonymous} {
		if rowsHolding(t, pool, id.MemoryKey) != 2 {
			t.Fatalf("the rows stored as before 171 do not hold %s in their JSON", id.MemoryKey)
		}
		readsAnswer(t, pool, id, value)
	}
	if n := passOver(t, pool, sealKeys); n != 6 {
		t.Fatalf("the pass sealed the keys of %d rows, want 6", n)
	}
	for _, id := range []memrow.Identity{keyed, named, anonymous} {
		for _, s := range []string{id.MemoryKey, id.UserID, id.Agent, id.SessionID} {
			if s != memrow.DefaultIdentity && rowsHolding(t, pool, s) != 0 {
				t.Errorf("after the pass, a row's JSON still holds %q", s)
			}
		}
		readsAnswer(t, pool, id, value)
	}
	if n := passOver(t, pool, sealKeys); n != 0 {
		t.Errorf("a second pass changed %d rows", n)
	}
}

// A row a redaction scrubbed before migration 175 holds its key in its JSON, its sealed
// text and revision key gone. The pass seals the key and user under a redaction key
// of the revision's own, the head under its seq's revision's: the JSON holds neither
// after it, every read answers both, and a second pass changes nothing.
func TestPassSealsTheKeysOfRowsRedactedBeforeMigration175(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Migrated(t, postgres, "acme")
	id := memrow.Identity{Org: "acme", Namespace: "old", Agent: "-", UserID: "carol-redacted-user", SessionID: "-", MemoryKey: "old-redacted-key-174"}
	// As a redaction scrubbed them before (queueScrubHead, queueScrubRevisions): the
	// scrubbed fields and the key in the JSON, no sealed text, no revision key.
	scrubbed := memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-000000000001", Version: 1, Seq: 1,
		Status: memrow.StatusActive, Value: json.RawMessage("null"), Tags: []string{}, Entities: []string{}, Tombstone: true}
	scrubbed.UserID = ""
	raw, err := json.Marshal(scrubbed)
	if err != nil {
		t.Fatal(err)
	}
	payload := string(raw[:len(raw)-1]) + `, "redacted": true}`
	for _, q := range []string{
		`INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
			content_sha256, row) VALUES ($1, $2, $3, loom.named_user($1, $4), $5, loom.key_ref($1, $6), $7, 1, 1, '', $8)`,
		`INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key,
			memory_id, version, content_sha256, status, row, audit, redacted_at) VALUES ($1, $2, 1, 'memory.tombstoned', 'memory.delete', $3,
			loom.named_user($1, $4), $5, loom.key_ref($1, $6), $7, 1, '', 'active', $8, '{}', now())`,
	} {
		if _, err := pool.Exec(ctx, q, id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, scrubbed.MemoryID, payload); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if rowsHolding(t, pool, id.MemoryKey) != 2 {
		t.Fatal("the rows stored as a redaction left them do not hold their key in their JSON")
	}
	readsAnswer(t, pool, id, "null")
	step := func(ctx context.Context, pool *pgxpool.Pool, table string, from, to pgtype.TID) (int64, error) {
		return sealRedacted(ctx, pool, nil, table, from, to)
	}
	// The revisions first, as Pass walks them: a head is sealed under its revision's key.
	if n := passOver(t, pool, step, "loom.memory_revisions", "loom.memory_current"); n != 2 {
		t.Fatalf("the pass sealed the keys of %d redacted rows, want the revision's and the head's", n)
	}
	if rowsHolding(t, pool, id.MemoryKey) != 0 {
		t.Error("after the pass, a redacted row's JSON still holds its key")
	}
	var sealed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM loom.memory_revisions WHERE sealed IS NOT NULL AND redaction_key IS NOT NULL`).Scan(&sealed); err != nil || sealed != 1 {
		t.Fatalf("%d revisions sealed under a redaction key (%v)", sealed, err)
	}
	readsAnswer(t, pool, id, "null")
	if n := passOver(t, pool, step, "loom.memory_revisions", "loom.memory_current"); n != 0 {
		t.Errorf("another pass changed %d rows", n)
	}
}
