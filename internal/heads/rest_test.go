package heads

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/memrow"
)

// A revision's text is kept sealed under its data key and read back whole through
// Row; once the key is destroyed, the row reads without it and no column holds it.
func TestRowTextIsSealedAtRestUnderTheDataKey(t *testing.T) {
	ctx := context.Background()
	pool := migratedDB(t)
	id := memrow.Identity{Org: "acme", Namespace: "rest", Agent: "-", UserID: "alice", SessionID: "-", MemoryKey: "vault"}
	insert := func(seq int64, value string) {
		t.Helper()
		r := &memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-000000000001", Version: seq, Seq: seq,
			Status: memrow.StatusActive, Value: json.RawMessage(value), Tags: []string{"safe"}, Entities: []string{"Vault"},
			Relations: []events.Relation{{Subject: "alice", Predicate: "knows", Object: "the code"}}, ContentSHA256: "sha"}
		payload, sealed, key := sealedAtRest(t, r)
		if bytes.Contains(payload, []byte("the vault code")) || bytes.Contains(sealed, []byte("the vault code")) {
			t.Fatalf("the row at rest holds its text in the clear: %s", payload)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id,
			session_id, memory_key, memory_id, version, content_sha256, status, row, audit, sealed)
			VALUES ($1, $2, $3, 'memory.written', 'memory.set', $4, loom.named_user($1, $5), $6, loom.key_ref($1, $7), $8, $3, 'sha', 'active', $9, '{}', $10)`,
			id.Org, id.Namespace, seq, id.Agent, id.UserID, id.SessionID, id.MemoryKey, r.MemoryID, payload, sealed); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, $3, $4)`,
			id.Org, id.Namespace, seq, key); err != nil {
			t.Fatal(err)
		}
	}
	insert(1, `"the vault code is 1234"`)
	insert(2, `{"note": "the vault code is 5678", "unicode": "clé ✓"}`)
	revs, err := KeyRevisions(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(revs) != 2 || string(revs[0].Value) != `"the vault code is 1234"` || revs[1].Tags[0] != "safe" ||
		revs[1].Entities[0] != "Vault" || len(revs[1].Relations) != 1 || revs[1].Relations[0].Object != "the code" {
		t.Fatalf("opened revisions: %+v", revs)
	}
	var v map[string]string
	if err := json.Unmarshal(revs[1].Value, &v); err != nil || v["unicode"] != "clé ✓" {
		t.Fatalf("the second value reads %s (%v)", revs[1].Value, err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM loom.revision_keys WHERE org = $1 AND namespace = $2 AND seq = 1`, id.Org, id.Namespace); err != nil {
		t.Fatal(err)
	}
	if revs, err = KeyRevisions(ctx, pool, id); err != nil {
		t.Fatal(err)
	}
	// The text is gone as a redaction leaves it: a null value, no tags.
	if len(revs) != 2 || (len(revs[0].Value) != 0 && string(revs[0].Value) != "null") || len(revs[0].Tags) != 0 || string(revs[1].Value) == "" {
		t.Fatalf("after the first key's destruction: %s, %v; %s", revs[0].Value, revs[0].Tags, revs[1].Value)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM loom.memory_revisions WHERE row::text LIKE '%vault code%' OR sealed::text LIKE '%vault code%'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows hold the text in the clear (%v)", n, err)
	}
}

// sealedAtRest is r as the commit stores it (AtRest) under a fresh data key, with the key.
func sealedAtRest(t *testing.T, r *memrow.Row) (payload, sealed, key []byte) {
	t.Helper()
	key, err := events.NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	if payload, sealed, err = AtRest(r, key); err != nil {
		t.Fatal(err)
	}
	return payload, sealed, key
}
