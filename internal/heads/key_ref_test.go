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

// keyRefOf is a memory key's stored form in Go: HMAC-SHA256 of "loom.key:" || key
// under the org's user reference key, lowercase hex (loom.key_ref, migration 171).
func keyRefOf(t *testing.T, pool *pgxpool.Pool, org, key string) string {
	t.Helper()
	ref, err := events.KeyRef(pgtest.OrgKey(t, pool, org), key)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// keyReads reads id's head and revision back through every kind of read (opened in
// SQL, opened in Go, a key-ordered walk) and fails unless each answers id's key.
func keyReads(t *testing.T, pool *pgxpool.Pool, id memrow.Identity) {
	t.Helper()
	headReads(t, pool, id, func(how string, rows ...*memrow.Row) {
		t.Helper()
		if len(rows) != 1 || rows[0] == nil || rows[0].MemoryKey != id.MemoryKey || rows[0].UserID != id.UserID {
			for _, r := range rows {
				if r != nil {
					t.Errorf("%s read %q of %q", how, r.MemoryKey, r.UserID)
				}
			}
			t.Fatalf("%s read %d heads, want one of key %q", how, len(rows), id.MemoryKey)
		}
	})
}

// headReads reads id's head and revisions back through the reads every identity
// column shares (Read, Many, WithKeys and WithKeyRefs opened in Go, a Page walk, OfSubject,
// KeyRevisions), handing each one's rows to check.
func headReads(t *testing.T, pool *pgxpool.Pool, id memrow.Identity, check func(how string, rows ...*memrow.Row)) {
	t.Helper()
	ctx := context.Background()
	head, err := Read(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	check("Read", head)
	many, err := Many(ctx, pool, id.Org, id.Namespace, []memrow.Identity{id})
	if err != nil {
		t.Fatal(err)
	}
	check("Many", many[IdentityKey(id)])
	var withKeys []*memrow.Row
	var unnamed Unnamed
	b := &pgx.Batch{}
	QueueWithKeys(b, nil, &unnamed, &withKeys, id.Org, id.Namespace, []string{id.MemoryKey, "absent"})
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if err := unnamed.Name(ctx, pool); err != nil {
		t.Fatal(err)
	}
	check("WithKeys (opened in Go)", withKeys...)
	// The round's read binds the keys' references as Go computes them (events.KeyRef).
	var withKeyRefs []*memrow.Row
	b = &pgx.Batch{}
	QueueWithKeyRefs(b, nil, &unnamed, &withKeyRefs, id.Org, id.Namespace, []string{keyRefOf(t, pool, id.Org, id.MemoryKey), keyRefOf(t, pool, id.Org, "absent")})
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if err := unnamed.Name(ctx, pool); err != nil {
		t.Fatal(err)
	}
	check("WithKeyRefs (references from Go)", withKeyRefs...)
	page, err := Page(ctx, pool, id.Org, id.Namespace, memrow.Identity{}, 10, false)
	if err != nil {
		t.Fatal(err)
	}
	check("Page", page...)
	after, err := Page(ctx, pool, id.Org, id.Namespace, page[0].Identity, 10, false)
	if err != nil || len(after) != 0 {
		t.Fatalf("the page after the head read %d heads (%v)", len(after), err)
	}
	if subject, err := OfSubject(ctx, pool, id.Org, id.Namespace, id.Agent, id.UserID, []string{id.MemoryKey}); err != nil {
		t.Fatal(err)
	} else {
		check("OfSubject", subject...)
	}
	revs, err := KeyRevisions(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	check("KeyRevisions", revs...)
}

// A memory's key is stored by its reference (migration 171): memory_current's and
// memory_revisions' key columns (and so their indexes) hold loom.key_ref, the row's
// JSON no key, and the key is in the sealed text alone; every read answers it.
func TestAStoredRowHoldsItsKeyOnlySealed(t *testing.T) {
	ctx := context.Background()
	pool := migratedDB(t)
	const clearKey = "diagnosis-2024-clear-key"
	id := memrow.Identity{Org: "acme", Namespace: "keyed", Agent: "-", UserID: "alice", SessionID: "-", MemoryKey: clearKey}
	r := &memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-000000000001", Version: 1, Seq: 1,
		Status: memrow.StatusActive, Value: json.RawMessage(`"the diagnosis"`)}
	payload, sealed, key := sealedAtRest(t, r)
	// As the commit writes them (command: queueHeadWrite, queueRevision).
	for _, q := range []string{
		`INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
			content_sha256, row, sealed) VALUES ($1, $2, $3, loom.named_user($1, $4), $5, (SELECT loom.key_ref($1, $6)), $7, 1, 1, '', $8, $9)`,
		`INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key,
			memory_id, version, content_sha256, status, row, audit, sealed) VALUES ($1, $2, 1, 'memory.written', 'memory.set', $3,
			loom.named_user($1, $4), $5, (SELECT loom.key_ref($1, $6)), $7, 1, '', 'active', $8, '{}', $9)`,
	} {
		if _, err := pool.Exec(ctx, q, id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, r.MemoryID, payload, sealed); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, 1, $3)`, id.Org, id.Namespace, key); err != nil {
		t.Fatal(err)
	}
	ref := keyRefOf(t, pool, id.Org, clearKey)
	var clear, keyed int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM loom.memory_current WHERE strpos(memory_key || row::text || encode(sealed, 'escape'), $1) > 0)
		+ (SELECT count(*) FROM loom.memory_revisions WHERE strpos(memory_key || row::text || encode(sealed, 'escape'), $1) > 0),
		(SELECT count(*) FROM loom.memory_current WHERE memory_key = $2) + (SELECT count(*) FROM loom.memory_revisions WHERE memory_key = $2)`,
		clearKey, ref).Scan(&clear, &keyed); err != nil {
		t.Fatal(err)
	}
	if clear != 0 || keyed != 2 {
		t.Fatalf("%d rows hold the key in the clear, %d of 2 by HMAC-SHA256('loom.key:' || key) under the org's key", clear, keyed)
	}
	keyReads(t, pool, id)
}

// Rows a Loom before migration 171 stored hold their key in the columns and in their
// JSON, not in their sealed text. The migration rewrites the columns to the key's
// reference (making the org's key for an org whose rows name no user, which had none)
// and leaves the JSON, so each row reads its key as before.
func TestMigrationStoresExistingKeysByReference(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.MigratedBefore(t, postgres, "171")
	named := memrow.Identity{Org: "acme", Namespace: "old", Agent: "-", UserID: "alice", SessionID: "-", MemoryKey: "old-clear-key"}
	// An org whose rows name no user had no key before.
	anonymous := memrow.Identity{Org: "anon", Namespace: "old", Agent: "-", UserID: "-", SessionID: "-", MemoryKey: "anon-clear-key"}
	if _, err := pool.Exec(ctx, `INSERT INTO loom.user_ref_keys (org, key) VALUES ($1, gen_random_bytes(32))`, named.Org); err != nil {
		t.Fatal(err)
	}
	for _, id := range []memrow.Identity{named, anonymous} {
		r := memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-000000000001", Version: 1, Seq: 1,
			Status: memrow.StatusActive, Value: json.RawMessage(`"old value"`)}
		// Sealed as before: the text holds neither user nor key, the JSON the key.
		bare := r
		bare.UserID, bare.MemoryKey = "", ""
		_, sealed, key := sealedAtRest(t, &bare)
		whole := memrow.Row{Identity: id, MemoryID: r.MemoryID, Version: 1, Seq: 1, Status: memrow.StatusActive}
		if id.UserID != memrow.DefaultIdentity {
			whole.UserID = ""
		}
		payload, err := json.Marshal(whole)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
				content_sha256, row, sealed) VALUES ($1, $2, $3, loom.named_user($1, $4), $5, $6, $7, 1, 1, '', $8, $9)`,
			`INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key,
				memory_id, version, content_sha256, status, row, audit, sealed) VALUES ($1, $2, 1, 'memory.written', 'memory.set', $3,
				loom.named_user($1, $4), $5, $6, $7, 1, '', 'active', $8, '{}', $9)`,
		} {
			if _, err := pool.Exec(ctx, q, id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, r.MemoryID, payload, sealed); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if _, err := pool.Exec(ctx, `INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, 1, $3)`, id.Org, id.Namespace, key); err != nil {
			t.Fatal(err)
		}
	}

	pgtest.MigrateRest(t, pool)
	for _, id := range []memrow.Identity{named, anonymous} {
		ref := keyRefOf(t, pool, id.Org, id.MemoryKey)
		var keyed, inJSON int
		if err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM loom.memory_current WHERE org = $1 AND memory_key = $2)
			+ (SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND memory_key = $2),
			(SELECT count(*) FROM loom.memory_current WHERE org = $1 AND row->>'memory_key' = $3)`, id.Org, ref, id.MemoryKey).Scan(&keyed, &inJSON); err != nil {
			t.Fatal(err)
		}
		if keyed != 2 || inJSON != 1 {
			t.Fatalf("%s: %d of 2 rows hold the key's reference in their column, %d of 1 heads the key in their JSON", id.Org, keyed, inJSON)
		}
		keyReads(t, pool, id)
	}
}
