package heads

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pgtest"
)

// Rows a Loom before migration 155 stored name their user in the clear: in the
// columns, in a row's JSON, in the erasure ledger's scope. The migration rewrites each
// to the user's reference (events.UserRef under the org's key, made here as the org
// had none), and every read still answers the user: a head by its identity, the
// namespace's users, the erasure's user.
func TestMigrationNamesExistingUsersByReference(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.MigratedBefore(t, postgres, "155")
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// A head sealed the old way: the user in the row's JSON, not in its sealed text.
	id := memrow.Identity{Org: "acme", Namespace: "old", Agent: "-", UserID: "alice-clear-id", SessionID: "-", MemoryKey: "drink"}
	r := &memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-000000000001", Version: 1, Seq: 1,
		Status: memrow.StatusActive, Value: json.RawMessage(`"alice drinks tea"`)}
	key, err := events.NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	anonymous := *r
	anonymous.UserID = ""
	_, sealed, err := AtRest(&anonymous, key)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(memrow.Row{Identity: id, MemoryID: r.MemoryID, Version: 1, Seq: 1, Status: memrow.StatusActive})
	if err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
		content_sha256, row, sealed) VALUES ($1, $2, $3, $4, $5, $6, $7, 1, 1, '', $8, $9)`,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, r.MemoryID, payload, sealed)
	exec(`INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, 1, $3)`, id.Org, id.Namespace, key)
	exec(`INSERT INTO loom.content_keys (org, namespace, user_id, key) VALUES ($1, $2, $3, gen_random_bytes(32))`, id.Org, id.Namespace, id.UserID)
	exec(`INSERT INTO loom.erasure_ledger (org, id, scope, purge, actor, status, lease_until)
		VALUES ($1, gen_random_uuid(), jsonb_build_object('kind', 'user_in_org', 'user_id', $2::text), false, 'admin', 'completed', now())`, id.Org, id.UserID)

	pgtest.MigrateRest(t, pool)
	var refKey []byte
	if err := pool.QueryRow(ctx, `SELECT loom.unwrapped_key(key) FROM loom.user_ref_keys WHERE org = $1`, id.Org).Scan(&refKey); err != nil {
		t.Fatalf("the migration made no user reference key for the org: %v", err)
	}
	ref, err := events.UserRef(refKey, id.UserID)
	if err != nil {
		t.Fatal(err)
	}
	var clear int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM loom.memory_current WHERE strpos(user_id || row::text, $1) > 0)
		+ (SELECT count(*) FROM loom.content_keys WHERE user_id = $1)
		+ (SELECT count(*) FROM loom.erasure_ledger WHERE strpos(scope::text, $1) > 0)
		+ (SELECT count(*) FROM loom.memory_current WHERE user_id <> $2)
		+ (SELECT count(*) FROM loom.content_keys WHERE user_id <> $2)`, id.UserID, ref).Scan(&clear); err != nil {
		t.Fatal(err)
	}
	if clear != 0 {
		t.Fatalf("%d rows still name the user in the clear, or by anything but events.UserRef", clear)
	}
	head, err := Read(ctx, pool, id)
	if err != nil || head == nil || head.UserID != id.UserID || string(head.Value) != `"alice drinks tea"` {
		t.Fatalf("the rewritten head reads %+v (%v)", head, err)
	}
	if users, err := UsersOf(ctx, pool, id.Org, id.Namespace, 10); err != nil || len(users) != 1 || users[0] != id.UserID {
		t.Fatalf("the namespace's users read %v (%v)", users, err)
	}
	var erased string
	if err := pool.QueryRow(ctx, `SELECT loom.ledger_user(org, scope) FROM loom.erasure_ledger WHERE org = $1`, id.Org).Scan(&erased); err != nil || erased != id.UserID {
		t.Fatalf("the erasure's user reads %q (%v)", erased, err)
	}
}
