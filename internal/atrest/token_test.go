package atrest

import (
	"context"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/pgtest"
)

// A token bound to a session and no user seals its session under a key of its own
// (migration 179), stored raw without LOOM_KEK: the pass wraps it, and the token
// authenticates with its session as before.
func TestPassWrapsTheKeysOfSessionBoundTokens(t *testing.T) {
	ctx := context.Background()
	raw := pgtest.Migrated(t, postgres, "acme")
	secret, p, err := auth.NewStore(raw).Create(ctx, auth.NewToken{Org: "acme", Role: auth.RoleReader, ReadSessionID: "s-7"})
	if err != nil {
		t.Fatal(err)
	}
	ring := pgtest.Ring(t)
	pool, err := pg.Open(ctx, pg.PoolConfig{DSN: raw.Config().ConnString(), KEK: ring.SessionValue()})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	counts, err := Pass(ctx, pool, ring)
	if err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := pool.QueryRow(ctx, `SELECT read_session_key FROM loom.api_tokens WHERE token_id = $1`, p.TokenID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if counts.Wrapped["loom.api_tokens"] != 1 || !ring.Current(stored) {
		t.Fatalf("the pass wrapped %d token keys; the key is stored under the current KEK: %t", counts.Wrapped["loom.api_tokens"], ring.Current(stored))
	}
	got, err := auth.NewStore(pool).Authenticate(ctx, secret)
	if err != nil || got.ReadSessionID != "s-7" {
		t.Fatalf("after the pass the token authenticates as session %q: %v", got.ReadSessionID, err)
	}
}
