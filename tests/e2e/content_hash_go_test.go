package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// unlikeSQL counts the heads and revisions of a namespace whose stored content hash is
// not the one loom.content_hash computes from their plain digest under their scope's
// stored key (every other caller, and every lookup by content, hashes in SQL).
func unlikeSQL(t *testing.T, e *phaseEnv, org, ns string) int64 {
	t.Helper()
	return testenv.Int(t, e.pool, `SELECT count(*) FROM (
			SELECT org, namespace, user_id, seq, row, sealed, content_sha256 FROM loom.memory_current WHERE org = $1 AND namespace = $2
			UNION ALL SELECT org, namespace, user_id, seq, row, sealed, content_sha256 FROM loom.memory_revisions WHERE org = $1 AND namespace = $2) r
		WHERE r.content_sha256 IS DISTINCT FROM
			loom.content_hash(r.org, r.namespace, r.user_id, loom.opened_row(r.row, r.sealed, r.org, r.namespace, r.seq)->>'content_sha256')`,
		org, ns)
}

// The commit hashes a row's content in Go under its scope's content key once it holds
// the key (a scope's later writes): the hash it stores is the one Postgres computes for
// the row, so lookups by content find it. Rows of one write, of a conflict's copy of
// its peer (a commit of two rows), of a bulk write, with a user and without.
func TestStoredContentHashesAreTheOnesPostgresComputes(t *testing.T) {
	e := newPhaseEnv(t, nil)
	ctx := context.Background()
	who := client.Identity{UserID: "zoë-" + marker(t)}
	put := func(key, value, user string) {
		t.Helper()
		body := map[string]any{"value": value}
		if user != "" {
			body["user_id"] = user
		}
		if r := e.c.Put(t, e.ns, key, body); r.Status != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", key, r.Status, r.Body)
		}
	}
	put("first", "the user lives in Lisbon", who.UserID) // the scope's key is made here
	put("second", "the user's favourite colour is green", who.UserID)
	put("third", "the user lives in Berlin", who.UserID) // a conflict: its peer's copy commits with it
	put("plain-1", "a memory of no user", "")
	put("plain-2", "another memory of no user", "")
	if _, err := e.c.Typed(t).BulkSet(ctx, e.ns, client.BulkSetRequest{Entries: []client.BulkEntry{
		{Key: "bulk-1", Value: "the first entry of a batch", Identity: who},
		{Key: "bulk-2", Value: "a second entry, of no user"},
	}}); err != nil {
		t.Fatalf("bulk: %v", err)
	}
	rows := testenv.Int(t, e.pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2`, e.org, e.ns)
	if rows < 7 {
		t.Fatalf("%d revisions written, want at least 7", rows)
	}
	if n := unlikeSQL(t, e, e.org, e.ns); n != 0 {
		t.Errorf("%d of the namespace's heads and revisions store a content hash other than loom.content_hash's", n)
	}
}

// A process that holds a scope's content key (an hour's TTL here) and writes after
// another process's erasure of the scope destroyed that key stores the hash under the
// scope's new key, the one its write made: the key it holds is no longer the scope's,
// and is not used.
func TestAWriteAfterAnotherProcessErasedItsScopeHashesUnderTheNewKey(t *testing.T) {
	longCache := func(c *config.Config) { c.Command.ContentKeyTTL = time.Hour }
	a, urlA := env.API(t, longCache)
	_, urlB := env.API(t, longCache)
	org, ns, user := testenv.Unique(t, "org"), testenv.Unique(t, "rekeyed"), "bea"
	token := env.Token(t, a, auth.NewToken{Org: org})
	onA, onB := testenv.NewClient(urlA, token), testenv.NewClient(urlB, token)
	put := func(key, value string) {
		t.Helper()
		if r := onA.Put(t, ns, key, map[string]any{"value": value, "user_id": user}); r.Status != http.StatusOK {
			t.Fatalf("PUT %s on the first process: %d %s", key, r.Status, r.Body)
		}
	}
	put("k1", "bea's first memory")  // makes the scope's key
	put("k2", "bea's second memory") // the first process now holds it
	keyBefore := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.content_keys WHERE org = $1 AND namespace = $2`, org, ns)
	if keyBefore != 1 {
		t.Fatalf("%d content keys in the namespace before the erasure, want 1", keyBefore)
	}

	onB.Erase(t, map[string]any{"user_id": user})

	put("k3", "bea's memory after the erasure") // makes the scope's key again
	e := &phaseEnv{t: t, pool: env.PG(t)}
	if n := unlikeSQL(t, e, org, ns); n != 0 {
		t.Errorf("%d heads or revisions written after the erasure store a hash under a key other than the scope's", n)
	}
	var stored string
	if err := e.pool.QueryRow(context.Background(), `SELECT content_sha256 FROM loom.memory_current WHERE org = $1 AND namespace = $2`,
		org, ns).Scan(&stored); err != nil {
		t.Fatalf("the head written after the erasure: %v", err)
	}
	if len(stored) != 64 {
		t.Errorf("the head written after the erasure stores content hash %q", stored)
	}
}
