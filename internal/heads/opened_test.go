package heads

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pgtest"
)

// storeSealed writes r as a head at seq, its text sealed under a data key kept as
// storedKey (nil: the key destroyed) or the row unsealed (seal false); column names the
// head's user column, which a row sealed before migration 155 alone names.
func storeSealed(t testing.TB, pool *pgxpool.Pool, r memrow.Row, column string, seal bool, key, storedKey []byte) {
	t.Helper()
	ctx := context.Background()
	payload, sealed, err := AtRest(&r, key)
	if err != nil {
		t.Fatal(err)
	}
	if !seal {
		whole := r
		whole.UserID = ""
		if payload, err = json.Marshal(&whole); err != nil {
			t.Fatal(err)
		}
		sealed = nil
	}
	if _, err := pool.Exec(ctx, `INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key,
		memory_id, version, seq, content_sha256, row, sealed) VALUES ($1, $2, $3, loom.named_user($1, $4), $5, loom.key_ref($1, $6), $7, 1, $8, $9, $10, $11)`,
		r.Org, r.Namespace, r.Agent, column, r.SessionID, r.MemoryKey, r.MemoryID, r.Seq, r.ContentSHA256, payload, sealed); err != nil {
		t.Fatal(err)
	}
	if storedKey != nil {
		if _, err := pool.Exec(ctx, `INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, $3, $4)`,
			r.Org, r.Namespace, r.Seq, storedKey); err != nil {
			t.Fatal(err)
		}
	}
}

// A search's heads, and a write's heads read by key, opened in Go are the heads
// loom.opened_row opens in SQL, field for field, users named as it names them (from the
// text, else the column), except that the value comes back as the commit sealed it: its
// canonical JSON, keys in byte order, which jsonb reorders by length first.
func TestHeadsOpenedInGoAreTheHeadsOpenedInSQL(t *testing.T) {
	ctx := context.Background()
	pool := migratedDB(t)
	base := memrow.Identity{Org: "acme", Namespace: "opened", Agent: "-", SessionID: "-"}
	canonical := `{"aa":1,"b":[true,"x"]}`
	rowOf := func(key, user string, seq int64) memrow.Row {
		id := base
		id.MemoryKey, id.UserID = key, user
		return memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-00000000000" + string(rune('0'+seq)), Version: 1, Seq: seq,
			Status: memrow.StatusActive, Value: json.RawMessage(canonical), Tags: []string{"t"}, Entities: []string{"Vault"},
			EntityTypes: map[string]string{"Vault": "place"}, Relations: []events.Relation{{Subject: "Vault", Predicate: "in", Object: "Bank"}},
			ContentSHA256: "sha-" + key}
	}
	key, err := events.NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	storeSealed(t, pool, rowOf("sealed", "alice", 1), "alice", true, key, key)
	storeSealed(t, pool, rowOf("before155", "", 2), "bob", true, key, key) // the text names no user
	storeSealed(t, pool, rowOf("keyless", "", 3), "carol", true, key, nil) // its key destroyed
	storeSealed(t, pool, rowOf("unsealed", "", 4), "dave", false, nil, nil)
	ids := []memrow.Identity{
		{Org: "acme", Namespace: "opened", Agent: "-", UserID: "alice", SessionID: "-", MemoryKey: "sealed"},
		{Org: "acme", Namespace: "opened", Agent: "-", UserID: "bob", SessionID: "-", MemoryKey: "before155"},
		{Org: "acme", Namespace: "opened", Agent: "-", UserID: "carol", SessionID: "-", MemoryKey: "keyless"},
		{Org: "acme", Namespace: "opened", Agent: "-", UserID: "dave", SessionID: "-", MemoryKey: "unsealed"},
	}
	inSQL, inGo := map[string]*memrow.Row{}, map[string]*memrow.Row{}
	var unnamed Unnamed
	b := &pgx.Batch{}
	QueueMany(b, inSQL, "acme", "opened", ids)
	QueueManyOpened(b, nil, &unnamed, inGo, "acme", "opened", ids)
	var byKey []*memrow.Row
	QueueWithKeys(b, nil, &unnamed, &byKey, "acme", "opened", []string{"sealed", "before155", "keyless", "unsealed"})
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if err := unnamed.Name(ctx, pool); err != nil {
		t.Fatal(err)
	}
	byKeyGo := map[string]*memrow.Row{}
	for _, r := range byKey {
		byKeyGo[IdentityKey(r.Identity)] = r
	}
	if len(inSQL) != 4 || len(inGo) != 4 || len(byKeyGo) != 4 {
		t.Fatalf("read %d heads in SQL, %d in Go by identity and %d by key, want 4 each", len(inSQL), len(inGo), len(byKeyGo))
	}
	for k, want := range inSQL {
		if !reflect.DeepEqual(inGo[k], byKeyGo[k]) {
			t.Fatalf("%q read by key\n%+v\nby identity\n%+v", k, byKeyGo[k], inGo[k])
		}
		got := inGo[k]
		if got == nil {
			t.Fatalf("Go did not read %q", k)
		}
		var wantValue, gotValue any
		_ = json.Unmarshal(want.Value, &wantValue)
		_ = json.Unmarshal(got.Value, &gotValue)
		if !reflect.DeepEqual(wantValue, gotValue) {
			t.Fatalf("%s: value %s in Go, %s in SQL", got.MemoryKey, got.Value, want.Value)
		}
		if opensText := got.MemoryKey == "sealed" || got.MemoryKey == "before155"; opensText && !bytes.Equal(got.Value, []byte(canonical)) {
			t.Fatalf("%s: value %s in Go, want the canonical %s", got.MemoryKey, got.Value, canonical)
		}
		w, g := *want, *got
		w.Value, g.Value = nil, nil
		if !reflect.DeepEqual(w, g) {
			t.Fatalf("%s: opened in Go\n%+v\nin SQL\n%+v", got.MemoryKey, g, w)
		}
	}
	if u := inGo[IdentityKey(ids[1])].UserID; u != "bob" {
		t.Fatalf("a row whose text names no user is named %q, want its column's bob", u)
	}
}

// A data key wrapped under the KEK is opened with the reader's ring.
func TestHeadsOpenedInGoUnwrapTheirKeys(t *testing.T) {
	ctx := context.Background()
	pool := migratedDB(t)
	ring := pgtest.Ring(t)
	key, stored, err := kek.NewKey(ring)
	if err != nil {
		t.Fatal(err)
	}
	id := memrow.Identity{Org: "acme", Namespace: "wrapped", Agent: "-", UserID: "alice", SessionID: "-", MemoryKey: "vault"}
	storeSealed(t, pool, memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-000000000001", Version: 1, Seq: 1,
		Status: memrow.StatusActive, Value: json.RawMessage(`"the vault code is 1234"`), ContentSHA256: "sha-vault"}, "alice", true, key, stored)
	into := map[string]*memrow.Row{}
	var unnamed Unnamed
	b := &pgx.Batch{}
	QueueManyOpened(b, ring, &unnamed, into, id.Org, id.Namespace, []memrow.Identity{id})
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if r := into[IdentityKey(id)]; r == nil || string(r.Value) != `"the vault code is 1234"` || r.UserID != "alice" {
		t.Fatalf("read %+v", r)
	}
	b = &pgx.Batch{}
	QueueManyOpened(b, nil, &unnamed, into, id.Org, id.Namespace, []memrow.Identity{id})
	if err := pool.SendBatch(ctx, b).Close(); err == nil {
		t.Fatal("a wrapped key opened without the ring")
	}
}

// BenchmarkHeadsOfAPage reads a search page's ten heads among 2,000 sealed ones, opened
// by loom.opened_row in SQL (sql) and in Go (go), one round trip each.
func BenchmarkHeadsOfAPage(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.Migrated(b, postgres, "acme")
	const n = 2000
	var ids []memrow.Identity
	for i := 0; i < n; i++ {
		key, err := events.NewDataKey()
		if err != nil {
			b.Fatal(err)
		}
		id := memrow.Identity{Org: "acme", Namespace: "page", Agent: "-", UserID: fmt.Sprintf("user%d", i%7), SessionID: "-", MemoryKey: fmt.Sprintf("k%d", i)}
		storeSealed(b, pool, memrow.Row{Identity: id, MemoryID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Version: 1, Seq: int64(i + 1),
			Status: memrow.StatusActive, Value: json.RawMessage(fmt.Sprintf(`"the harbour crane %d lifts cobalt containers to the quay"`, i)),
			Tags: []string{"harbour"}, Entities: []string{"Crane"}, ContentSHA256: fmt.Sprintf("sha-%d", i)}, id.UserID, true, key, key)
		ids = append(ids, id)
	}
	if _, err := pool.Exec(ctx, "ANALYZE loom.memory_current; ANALYZE loom.revision_keys"); err != nil {
		b.Fatal(err)
	}
	page := func(i int) []memrow.Identity { return ids[(i*37)%(n-10) : (i*37)%(n-10)+10] }
	b.Run("sql", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if got, err := Many(ctx, pool, "acme", "page", page(i)); err != nil || len(got) != 10 {
				b.Fatalf("read %d heads: %v", len(got), err)
			}
		}
	})
	b.Run("go", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			got := map[string]*memrow.Row{}
			var unnamed Unnamed
			batch := &pgx.Batch{}
			QueueManyOpened(batch, nil, &unnamed, got, "acme", "page", page(i))
			if err := pool.SendBatch(ctx, batch).Close(); err != nil || len(got) != 10 {
				b.Fatalf("read %d heads: %v", len(got), err)
			}
		}
	})
}
