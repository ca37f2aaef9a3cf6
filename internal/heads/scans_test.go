package heads

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/memrow"
)

// Every read of the heads opens a row sealed at rest: whichever read a sweep, a page,
// memory.clear, memory.import or a snapshot runs, it gets the value, tags and entities
// the write stored, not the row without its text.
func TestEveryHeadReadOpensSealedRows(t *testing.T) {
	ctx := context.Background()
	pool := migratedDB(t)
	id := memrow.Identity{Org: "acme", Namespace: "sealed", Agent: "-", UserID: "alice", SessionID: "-", MemoryKey: "vault"}
	expired := time.Now().Add(-time.Hour)
	r := &memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-000000000001", Version: 1, Seq: 1,
		Status: memrow.StatusActive, Value: json.RawMessage(`"the vault code is 1234"`), Tags: []string{"safe"},
		Entities: []string{"Vault"}, ContentSHA256: "sha-vault", ExpiresAt: &expired}
	payload, sealed, key := sealedAtRest(t, r)
	if _, err := pool.Exec(ctx, `INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key,
		memory_id, version, seq, content_sha256, row, sealed, expires_at) VALUES ($1, $2, $3, loom.named_user($1, $4), $5, loom.key_ref($1, $6), $7, 1, 1, $8, $9, $10, $11)`,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, r.MemoryID, r.ContentSHA256, payload, sealed, expired); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, 1, $3)`,
		id.Org, id.Namespace, key); err != nil {
		t.Fatal(err)
	}
	opened := func(name string, rows []*memrow.Row, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(rows) != 1 || string(rows[0].Value) != `"the vault code is 1234"` || len(rows[0].Tags) != 1 || rows[0].Tags[0] != "safe" ||
			len(rows[0].Entities) != 1 || rows[0].Entities[0] != "Vault" {
			t.Fatalf("%s read %d heads: %+v", name, len(rows), rows)
		}
	}
	rows, err := Page(ctx, pool, id.Org, id.Namespace, memrow.Identity{}, 10, true)
	opened("Page", rows, err)
	rows, err = Expired(ctx, pool, id.Org, id.Namespace, "", 10)
	opened("Expired", rows, err)
	rows, err = Unlocked(ctx, pool, Scope{Org: id.Org, Namespace: id.Namespace, UserID: "alice"}, 10)
	opened("Unlocked", rows, err)
	rows, err = OfSubject(ctx, pool, id.Org, id.Namespace, id.Agent, id.UserID, []string{"vault"})
	opened("OfSubject", rows, err)
	var each []*memrow.Row
	err = EachLive(ctx, pool, id.Org, id.Namespace, func(r *memrow.Row) error { each = append(each, r); return nil })
	opened("EachLive", each, err)
	var byKey, bySHA []*memrow.Row
	var version, seq int64
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	b := &pgx.Batch{}
	var unnamed Unnamed
	QueueWithKeys(b, nil, &unnamed, &byKey, id.Org, id.Namespace, []string{"vault"})
	QueueWithContent(b, nil, &unnamed, &bySHA, id.Org, id.Namespace, []string{"alice"}, []string{"sha-vault"})
	QueueLock(b, id, &version, &seq)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if err := unnamed.Name(ctx, tx); err != nil {
		t.Fatal(err)
	}
	opened("QueueWithKeys", byKey, nil)
	opened("QueueWithContent", bySHA, nil)
	if version != 1 || seq != 1 {
		t.Fatalf("QueueLock read version %d, seq %d", version, seq)
	}
	if n, err := CountLocked(ctx, pool, Scope{Org: id.Org, Namespace: id.Namespace}); err != nil || n != 0 {
		t.Fatalf("CountLocked: %d, %v", n, err)
	}
	if sha, err := ContentSHA256(ctx, pool, id.Org, id.Namespace, r.MemoryID); err != nil || sha != "sha-vault" {
		t.Fatalf("ContentSHA256: %q, %v", sha, err)
	}
	if sha, err := ContentSHA256(ctx, pool, id.Org, id.Namespace, "00000000-0000-0000-0000-000000000009"); err != nil || sha != "" {
		t.Fatalf("ContentSHA256 of no head: %q, %v", sha, err)
	}
}
