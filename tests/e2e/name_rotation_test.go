package e2e

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/atrest"
	"github.com/loomplane/loom/internal/kek"
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
	if name.wrapKey != nil {
		if _, err := kek.OpenKey(newOnly, name.wrapKey); err == nil {
			t.Error("the kept copy of the org's name wrap key opens with the new KEK alone")
		}
	}
}

// storedKeysOf reads every key stored for org's rows, as stored.
func storedKeysOf(t *testing.T, pool *pgxpool.Pool, org string) [][]byte {
	t.Helper()
	q := `SELECT key FROM loom.user_ref_keys WHERE org = $1
		UNION ALL SELECT data_key FROM loom.revision_keys WHERE org = $1
		UNION ALL SELECT key FROM loom.content_keys WHERE org = $1
		UNION ALL SELECT data_key FROM loom.extraction_requests WHERE org = $1 AND data_key IS NOT NULL`
	var wraps bool
	if err := pool.QueryRow(context.Background(), `SELECT to_regclass('loom.name_wrap_keys') IS NOT NULL`).Scan(&wraps); err != nil {
		t.Fatal(err)
	}
	if wraps {
		q += ` UNION ALL SELECT key FROM loom.name_wrap_keys WHERE org = $1
			UNION ALL SELECT retired FROM loom.name_wrap_keys WHERE org = $1 AND retired IS NOT NULL`
	}
	rows, err := pool.Query(context.Background(), q, org)
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
