package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/atrest"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/tests/testenv"
)

// What Postgres kept from before the at-rest protections (rows whose text is in `row`,
// written before migration 056; data keys stored raw, before LOOM_KEK) reads as it
// is, and the at-rest pass brings it up to them: every row sealed, every key wrapped,
// each read answering as before. A KEK rotation is the same pass: configured
// "new,old", it wraps every key again under the new KEK, and the old one can go.
// Rows written before migration 101 hold their value's plain SHA-256 (in the column
// and the row): the pass keys it under the scope's key, and reads answer the plain one
// as before. An erasure takes a row the pass has not reached yet, text and all, and
// the user's content hash key.
func TestTheAtRestPassSealsOldRowsAndWrapsOldKeys(t *testing.T) {
	// Each command process runs the pass at start-up: the writes are made by one that
	// stops before the rows are taken back to their old form, the reads served by a
	// query process, which runs no pass.
	n, url, stop := env.Serve(t, []string{"api"}, nil)
	org := testenv.Unique(t, "org")
	token := env.Token(t, n, auth.NewToken{Org: org})
	c := testenv.NewClient(url, token)
	ns := testenv.Unique(t, "legacy")
	stamp := time.Now().UnixNano()
	values, plain := map[string]string{}, map[string]string{}
	for i, user := range []string{"ann", "ben"} {
		key := fmt.Sprintf("k%d", i)
		values[key] = fmt.Sprintf("legacy text %d %d", i, stamp)
		r := c.Put(t, ns, key, map[string]any{"value": values[key], "user_id": user, "tags": []string{"t"}})
		if r.Status != http.StatusOK {
			t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
		}
		plain[key], _ = r.JSON(t)["content_sha256"].(string)
	}
	stop()
	_, queryURL, _ := env.Serve(t, []string{"query"}, nil)
	reader := testenv.NewClient(queryURL, token)
	read := func(key, user string) string {
		t.Helper()
		r := reader.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/"+key+"?user_id="+user, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("get %s: %d %s", key, r.Status, r.Body)
		}
		if sha, _ := r.JSON(t)["content_sha256"].(string); sha != plain[key] {
			t.Fatalf("get %s answers content_sha256 %q, want the value's SHA-256 %q", key, sha, plain[key])
		}
		v, _ := r.JSON(t)["value"].(string)
		return v
	}
	pool := env.PG(t)
	ctx := context.Background()
	// The stored hashes are keyed: no column holds a value's plain hash.
	plainStored := func(p *pgxpool.Pool) int64 {
		t.Helper()
		return testenv.Int(t, p, `SELECT count(*) FROM (SELECT content_sha256, row FROM loom.memory_current WHERE org = $1 AND namespace = $2
			UNION ALL SELECT content_sha256, row FROM loom.memory_revisions WHERE org = $1 AND namespace = $2) r
			WHERE r.content_sha256 = ANY($3) OR r.row->>'content_sha256' = ANY($3)`, org, ns, []string{plain["k0"], plain["k1"]})
	}
	if n := plainStored(pool); n != 0 {
		t.Fatalf("%d rows store a plain content hash", n)
	}
	// Back to how an older Loom stored them: text and plain hash in `row`, the plain
	// hash in the column, keys raw, no content hash keys.
	for _, table := range []string{"loom.memory_current", "loom.memory_revisions"} {
		testenv.Exec(t, pool, `UPDATE `+table+` SET row = loom.opened_row(row, sealed, org, namespace, seq), sealed = NULL,
			content_sha256 = loom.opened_row(row, sealed, org, namespace, seq)->>'content_sha256' WHERE org = $1 AND namespace = $2`, org, ns)
	}
	testenv.Exec(t, pool, `DELETE FROM loom.content_keys WHERE org = $1 AND namespace = $2`, org, ns)
	if n := plainStored(pool); n != 4 {
		t.Fatalf("%d rows store a plain content hash as an older Loom did, want 4", n)
	}
	testenv.Exec(t, pool, `UPDATE loom.revision_keys SET data_key = loom.unwrapped_key(data_key) WHERE org = $1 AND namespace = $2`, org, ns)
	var refKey []byte
	if err := pool.QueryRow(ctx, `UPDATE loom.user_ref_keys SET key = loom.unwrapped_key(key) WHERE org = $1 RETURNING key`, org).Scan(&refKey); err != nil {
		t.Fatal(err)
	}
	if got := read("k0", "ann"); got != values["k0"] {
		t.Fatalf("an unsealed row under a raw key reads %q", got)
	}
	state := func(p *pgxpool.Pool) (unsealed, raw, total int64) {
		t.Helper()
		unsealed = testenv.Int(t, p, `SELECT count(*) FROM (SELECT row FROM loom.memory_current WHERE org = $1 AND namespace = $2
			UNION ALL SELECT row FROM loom.memory_revisions WHERE org = $1 AND namespace = $2) r WHERE r.row ? 'value'`, org, ns)
		raw = testenv.Int(t, p, `SELECT count(*) FILTER (WHERE octet_length(data_key) = 32) FROM loom.revision_keys WHERE org = $1 AND namespace = $2`, org, ns)
		total = testenv.Int(t, p, `SELECT count(*) FROM loom.revision_keys WHERE org = $1 AND namespace = $2`, org, ns)
		return
	}
	if unsealed, raw, total := state(pool); unsealed != 4 || raw != total {
		t.Fatalf("before the pass: %d rows hold their text, %d of %d keys raw", unsealed, raw, total)
	}

	ring, err := env.Config(nil).Keys.Ring()
	if err != nil {
		t.Fatal(err)
	}
	counts, err := atrest.Pass(ctx, pool, ring)
	if err != nil {
		t.Fatal(err)
	}
	if counts.Sealed["loom.memory_current"] < 2 || counts.Sealed["loom.memory_revisions"] < 2 ||
		counts.Wrapped["loom.revision_keys"] < 2 || counts.Wrapped["loom.user_ref_keys"] < 1 ||
		counts.Rehashed["loom.memory_current"] < 2 || counts.Rehashed["loom.memory_revisions"] < 2 {
		t.Fatalf("the pass did %+v", counts)
	}
	if n := plainStored(pool); n != 0 {
		t.Fatalf("after the pass %d rows store a plain content hash", n)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.content_keys WHERE org = $1 AND namespace = $2 AND octet_length(key) = $3`,
		org, ns, kek.WrappedSize); n != 2 {
		t.Fatalf("after the pass %d wrapped content hash keys, want one for each user", n)
	}
	if unsealed, raw, _ := state(pool); unsealed != 0 || raw != 0 {
		t.Fatalf("after the pass: %d rows hold their text, %d keys raw", unsealed, raw)
	}
	var wrappedRef, openedRef []byte
	if err := pool.QueryRow(ctx, `SELECT key, loom.unwrapped_key(key) FROM loom.user_ref_keys WHERE org = $1`, org).Scan(&wrappedRef, &openedRef); err != nil {
		t.Fatal(err)
	}
	if !ring.Current(wrappedRef) || !bytes.Equal(openedRef, refKey) {
		t.Fatalf("the user reference key is stored %x, opens to another key: %t", wrappedRef, !bytes.Equal(openedRef, refKey))
	}
	for key, user := range map[string]string{"k0": "ann", "k1": "ben"} {
		if got := read(key, user); got != values[key] {
			t.Fatalf("after the pass %s reads %q, want %q", key, got, values[key])
		}
	}

	// A rotation: the new KEK first. Every key goes under it, and a session given
	// only the new one opens every row. Then back, for the tests after this one.
	fresh, err := kek.Generate()
	if err != nil {
		t.Fatal(err)
	}
	old := env.Config(nil).Keys.KEK
	rotate := func(setting string) (*kek.Ring, *pgxpool.Pool) {
		t.Helper()
		r, err := kek.Parse(setting)
		if err != nil {
			t.Fatal(err)
		}
		p := poolWithKEK(t, r)
		if _, err := atrest.Pass(ctx, p, r); err != nil {
			t.Fatal(err)
		}
		return r, p
	}
	rotated, _ := rotate(fresh + "," + old)
	onlyNew := poolWithKEK(t, mustRing(t, fresh))
	if n := testenv.Int(t, onlyNew, `SELECT count(*) FROM loom.revision_keys WHERE substring(data_key FROM 2 FOR 8) <> $1`, rotated.CurrentID()); n != 0 {
		t.Errorf("%d keys are not under the new KEK after the rotation's pass", n)
	}
	var opened string
	if err := onlyNew.QueryRow(ctx, `SELECT loom.opened_row(row, sealed, org, namespace, seq)->>'value' FROM loom.memory_current
		WHERE org = $1 AND namespace = $2 AND memory_key = loom.key_ref(org, 'k0')`, org, ns).Scan(&opened); err != nil || opened != values["k0"] {
		t.Errorf("a session with only the new KEK reads %q, %v", opened, err)
	}
	back, _ := rotate(old + "," + fresh)
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.revision_keys WHERE substring(data_key FROM 2 FOR 8) <> $1`, back.CurrentID()); n != 0 {
		t.Fatalf("%d keys are not back under the suite's KEK", n)
	}

	// A row the pass has not reached: the erasure takes it, its text with it.
	testenv.Exec(t, pool, `UPDATE loom.memory_current SET row = loom.opened_row(row, sealed, org, namespace, seq), sealed = NULL WHERE org = $1 AND namespace = $2 AND user_id = loom.user_ref(org, 'ann')`, org, ns)
	testenv.Exec(t, pool, `UPDATE loom.memory_revisions SET row = loom.opened_row(row, sealed, org, namespace, seq), sealed = NULL WHERE org = $1 AND namespace = $2 AND user_id = loom.user_ref(org, 'ann')`, org, ns)
	_, commandURL, _ := env.Serve(t, []string{"command"}, nil)
	testenv.NewClient(commandURL, token).Erase(t, map[string]any{"user_id": "ann", "namespace": ns})
	if n := testenv.Int(t, pool, `SELECT count(*) FROM (SELECT row FROM loom.memory_current WHERE org = $1 AND namespace = $2
		UNION ALL SELECT row FROM loom.memory_revisions WHERE org = $1 AND namespace = $2) r WHERE strpos(r.row::text, $3) > 0`, org, ns, values["k0"]); n != 0 {
		t.Fatalf("%d rows still hold the erased text", n)
	}
	if got := read("k1", "ben"); got != values["k1"] {
		t.Fatalf("another user's row reads %q after the erasure", got)
	}
	if users := testenv.PGStrings(t, pool, `SELECT loom.user_name(org, user_id) FROM loom.content_keys WHERE org = $1 AND namespace = $2`, org, ns); fmt.Sprint(users) != "[ben]" {
		t.Fatalf("after ann's erasure the namespace's content hash keys are %v, want ben's", users)
	}
}

func mustRing(t *testing.T, setting string) *kek.Ring {
	t.Helper()
	r, err := kek.Parse(setting)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// poolWithKEK is a pool on the test Postgres whose sessions are given r's keys.
func poolWithKEK(t *testing.T, r *kek.Ring) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(env.Stack.Postgres.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams[kek.SessionParam] = r.SessionValue()
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
