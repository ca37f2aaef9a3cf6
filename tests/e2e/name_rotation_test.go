package e2e

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/atrest"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/tests/testenv"
)

// nameOpensForNoOneAfterRotation checks what an erased user's name leaves once the
// KEK is rotated and the old one destroyed: a kept copy of the sealed name travels
// with the user's wrapped key (the same row), so it must open under no key Postgres
// still holds, wrapped key included. The keys still held are every key the org's rows
// store, opened with the new KEK alone (the old one destroyed), and each key the
// org's user reference key derives; the user's key is tried as each of them unwraps
// it, and the name under each. The kept copy of the org's name wrap key must not open
// with the new KEK either. The suite's KEK is made current again after.
func nameOpensForNoOneAfterRotation(t *testing.T, org, user string, name storedName) {
	t.Helper()
	ctx := context.Background()
	fresh, err := kek.Generate()
	if err != nil {
		t.Fatal(err)
	}
	old := env.Config(nil).Keys.KEK
	rotate := func(setting string) {
		t.Helper()
		r := mustRing(t, setting)
		if _, err := atrest.Pass(ctx, poolWithKEK(t, r), r); err != nil {
			t.Fatalf("the rotation's at-rest pass: %v", err)
		}
	}
	rotate(fresh + "," + old)
	defer rotate(old + "," + fresh)
	newOnly := mustRing(t, fresh)
	pool := poolWithKEK(t, newOnly)

	var held [][]byte
	for _, stored := range storedKeysOf(t, pool, org) {
		if k, err := kek.OpenKey(newOnly, stored); err == nil {
			held = append(held, k)
		}
	}
	if len(held) == 0 {
		t.Fatal("after the rotation no stored key of the org opens with the new KEK")
	}
	orgKeys := pgKeys(t, pool, `SELECT key FROM loom.user_ref_keys WHERE org = $1`, org)
	if len(orgKeys) != 1 {
		t.Fatalf("the org holds %d user reference keys, want 1", len(orgKeys))
	}
	orgKey, err := kek.OpenKey(newOnly, orgKeys[0])
	if err != nil {
		t.Fatalf("the org's user reference key does not open with the new KEK: %v", err)
	}
	for _, label := range []string{"loom.user_name:" + name.ref, "loom.user_key.wrap"} {
		m := hmac.New(sha256.New, orgKey)
		m.Write([]byte(label))
		held = append(held, m.Sum(nil))
	}
	// The live users' keys, as each held key unwraps them, are keys held too.
	wrapped := pgKeys(t, pool, `SELECT key FROM loom.user_names WHERE org = $1`, org)
	for _, w := range held[:len(held):len(held)] {
		for _, k := range wrapped {
			if u, ok := unwrapUserKey(w, k); ok {
				held = append(held, u)
			}
		}
	}
	candidates := append([][]byte(nil), held...)
	for _, w := range held {
		if u, ok := unwrapUserKey(w, name.key); ok {
			candidates = append(candidates, u)
		}
	}
	for _, k := range candidates {
		if opened, ok := openAES(k, name.sealed); ok && opened == user {
			t.Fatal("after the erasure and a KEK rotation, a kept copy of the user's sealed name and wrapped key opens under a key Postgres still holds")
		}
	}
	if _, err := kek.OpenKey(newOnly, name.wrapKey); err == nil {
		t.Error("the kept copy of the org's name wrap key opens with the new KEK alone")
	}
	// The erasure's ledger row still names the user, its key wrapped again too.
	var erased string
	if err := pool.QueryRow(ctx, `SELECT loom.ledger_user(l.org, l.scope) FROM loom.erasure_ledger l JOIN loom.name_wrap_keys w USING (org)
		WHERE l.org = $1 AND (l.scope->>'user_wrap')::int = w.gen`, org).Scan(&erased); err != nil || erased != user {
		t.Errorf("after the rotation the erasure's ledger row names %q (%v), want the user", erased, err)
	}
}

// storedKeysOf reads every key stored for org's rows, as stored.
func storedKeysOf(t *testing.T, pool *pgxpool.Pool, org string) [][]byte {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT key FROM loom.user_ref_keys WHERE org = $1
		UNION ALL SELECT data_key FROM loom.revision_keys WHERE org = $1
		UNION ALL SELECT key FROM loom.content_keys WHERE org = $1
		UNION ALL SELECT data_key FROM loom.extraction_requests WHERE org = $1 AND data_key IS NOT NULL
		UNION ALL SELECT key FROM loom.name_wrap_keys WHERE org = $1
		UNION ALL SELECT retired FROM loom.name_wrap_keys WHERE org = $1 AND retired IS NOT NULL`, org)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// unwrapUserKey opens a user's key as loom.wrapped_user_key wrapped it: AES-256-CBC
// without padding under the wrap key, its IV first.
func unwrapUserKey(wrap, wrapped []byte) ([]byte, bool) {
	block, err := aes.NewCipher(wrap)
	if err != nil || len(wrapped) != aes.BlockSize+kek.KeySize {
		return nil, false
	}
	out := make([]byte, kek.KeySize)
	cipher.NewCBCDecrypter(block, wrapped[:aes.BlockSize]).CryptBlocks(out, wrapped[aes.BlockSize:])
	return out, true
}

// An org's name wrap key (migration 158) wraps its users' keys. Names wrapped as
// migration 156 wrapped them (under a key derived from the org's) in an org without a
// name wrap key are wrapped by the at-rest pass under one it makes; at a KEK rotation
// the pass replaces the key, rather than wrapping it again as it does the other data
// keys, wraps the names' keys again under the fresh one and drops the old: every name
// still reads, with the new KEK alone.
func TestTheAtRestPassReplacesNameWrapKeysAtARotation(t *testing.T) {
	// The writes are made by a process that stops before the names are taken back to
	// their old form: its own at-rest pass runs no more.
	n, url, stop := env.Serve(t, []string{"api"}, nil)
	org := testenv.Unique(t, "org")
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	ns := testenv.Unique(t, "names")
	for _, user := range []string{"ann", "ben"} {
		if r := c.Put(t, ns, "k-"+user, map[string]any{"value": "a memory of " + user, "user_id": user}); r.Status != http.StatusOK {
			t.Fatalf("set as %s: %d %s", user, r.Status, r.Body)
		}
	}
	stop()
	pool := env.PG(t)
	ctx := context.Background()
	names := func(p *pgxpool.Pool) string {
		t.Helper()
		return fmt.Sprint(testenv.PGStrings(t, p, `SELECT loom.user_name($1, loom.user_ref($1, u)) FROM unnest(ARRAY['ann', 'ben']) AS u`, org))
	}
	// wrappedUnder counts the org's names under its name wrap key of generation gen,
	// stored wrapped under the KEK, with no retired key beside it.
	wrappedUnder := func(p *pgxpool.Pool, gen int) int64 {
		t.Helper()
		return testenv.Int(t, p, `SELECT count(*) FROM loom.user_names n JOIN loom.name_wrap_keys w USING (org)
			WHERE org = $1 AND n.wrap = w.gen AND w.gen = $2 AND w.retired IS NULL AND octet_length(w.key) = $3`, org, gen, kek.WrappedSize)
	}
	if got := wrappedUnder(pool, 1); got != 2 || names(pool) != "[ann ben]" {
		t.Fatalf("%d names are wrapped under the org's first name wrap key, and read %s", got, names(pool))
	}
	testenv.Exec(t, pool, `UPDATE loom.user_names SET key = loom.wrapped_user_key(org, loom.unwrapped_user_key(org, key, wrap)), wrap = 0 WHERE org = $1`, org)
	testenv.Exec(t, pool, `DELETE FROM loom.name_wrap_keys WHERE org = $1`, org)
	if got := names(pool); got != "[ann ben]" {
		t.Fatalf("names wrapped as migration 156 did read %s", got)
	}
	ring := mustRing(t, env.Config(nil).Keys.KEK)
	if _, err := atrest.Pass(ctx, pool, ring); err != nil {
		t.Fatal(err)
	}
	if got := wrappedUnder(pool, 1); got != 2 || names(pool) != "[ann ben]" {
		t.Fatalf("after the pass %d names are wrapped under a name wrap key it made, and read %s", got, names(pool))
	}

	fresh, err := kek.Generate()
	if err != nil {
		t.Fatal(err)
	}
	old := env.Config(nil).Keys.KEK
	rotated := mustRing(t, fresh+","+old)
	if _, err := atrest.Pass(ctx, poolWithKEK(t, rotated), rotated); err != nil {
		t.Fatal(err)
	}
	onlyNew := poolWithKEK(t, mustRing(t, fresh))
	if got := wrappedUnder(onlyNew, 2); got != 2 || names(onlyNew) != "[ann ben]" {
		t.Errorf("after the rotation %d names are wrapped under a second name wrap key, and read %s with the new KEK", got, names(onlyNew))
	}
	back := mustRing(t, old+","+fresh)
	if _, err := atrest.Pass(ctx, poolWithKEK(t, back), back); err != nil {
		t.Fatal(err)
	}
	if got := wrappedUnder(pool, 3); got != 2 || names(pool) != "[ann ben]" {
		t.Fatalf("back under the suite's KEK %d names are wrapped under a third name wrap key, and read %s", got, names(pool))
	}
}

// A user named while a rotation replaces the org's name wrap key keeps the name: the
// swap waits for the transaction that wrapped the user's key under the old one, and
// the pass wraps it again once it commits, so no name is left under a key the pass
// drops. The transaction is held open until the pass is seen waiting (or done, which
// without the wait leaves the name under the dropped key).
func TestAUserNamedDuringARotationKeepsTheName(t *testing.T) {
	fresh, err := kek.Generate()
	if err != nil {
		t.Fatal(err)
	}
	old := env.Config(nil).Keys.KEK
	n, url := env.API(t, nil)
	org := testenv.Unique(t, "org")
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	if r := c.Put(t, testenv.Unique(t, "rotating"), "k", map[string]any{"value": "the org's first write makes its keys", "user_id": "u-first"}); r.Status != http.StatusOK {
		t.Fatalf("the first write: %d %s", r.Status, r.Body)
	}
	ctx := context.Background()
	both := mustRing(t, fresh+","+old)
	pool := poolWithKEK(t, both)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT loom.named_user($1, 'u-held')`, org); err != nil {
		t.Fatal(err)
	}
	passed := make(chan error, 1)
	passPool := poolWithKEK(t, both)
	go func() {
		_, err := atrest.Pass(ctx, passPool, both)
		passed <- err
	}()
	var passErr error
	waiting := false
	for !waiting {
		select {
		case passErr = <-passed:
			waiting = true
			passed <- passErr
		case <-time.After(20 * time.Millisecond):
			waiting = testenv.Int(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
				AND query LIKE 'UPDATE loom.name_wrap_keys w SET retired = w.key%'`) > 0
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-passed; err != nil {
		t.Fatalf("the rotation's pass: %v", err)
	}
	var names, current, read int64
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE n.wrap = w.gen AND w.gen = 2 AND w.retired IS NULL),
			count(*) FILTER (WHERE loom.user_name(n.org, n.user_ref) IN ('u-first', 'u-held'))
		FROM loom.user_names n JOIN loom.name_wrap_keys w USING (org) WHERE org = $1`, org).Scan(&names, &current, &read); err != nil {
		t.Fatal(err)
	}
	if names != 2 || current != 2 || read != 2 {
		t.Errorf("of the org's %d names, %d are under its second name wrap key, %d read", names, current, read)
	}
	back := mustRing(t, old+","+fresh)
	if _, err := atrest.Pass(ctx, poolWithKEK(t, back), back); err != nil {
		t.Fatal(err)
	}
}
