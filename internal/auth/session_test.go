package auth_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/pgtest"
)

var postgres *devstack.Postgres

func TestMain(m *testing.M) { os.Exit(devstack.RunWithPostgres(m.Run, &postgres)) }

// authenticated is what a process that never saw secret answers for it.
func authenticated(t *testing.T, pool *pgxpool.Pool, secret string) auth.Principal {
	t.Helper()
	p, err := auth.NewStore(pool).Authenticate(context.Background(), secret)
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	return p
}

// rowHolds reports whether the token's row, any column, holds needle in the clear.
func rowHolds(t *testing.T, pool *pgxpool.Pool, id, needle string) bool {
	t.Helper()
	var holds bool
	if err := pool.QueryRow(context.Background(), `SELECT strpos(t::text, $2) > 0 OR position(convert_to($2, 'UTF8') IN coalesce(t.read_session, '')) > 0
		FROM loom.api_tokens t WHERE token_id = $1`, id, needle).Scan(&holds); err != nil {
		t.Fatal(err)
	}
	return holds
}

// A session-bound token's session is stored sealed (migration 179): under its user's
// name key when it is bound to a user too, else under a key of its own. Authenticate,
// List and Rotate answer the session as before; once the user's name (and key) is
// erased, the token bound to the user reaches neither the user nor the session, and
// the token bound to the session alone is unchanged.
func TestASessionBoundTokenKeepsItsSessionSealed(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Migrated(t, postgres, "acme")
	store := auth.NewStore(pool)
	bound := map[string]auth.NewToken{
		"user and session": {Org: "acme", Role: auth.RoleWriter, ReadUserID: "alice", ReadSessionID: "session-of-alice-7f3a"},
		"session alone":    {Org: "acme", Role: auth.RoleReader, ReadSessionID: "session-alone-91c2"},
	}
	secrets := map[string]string{}
	for name, tok := range bound {
		secret, p, err := store.Create(ctx, tok)
		if err != nil {
			t.Fatalf("%s: create: %v", name, err)
		}
		if rowHolds(t, pool, p.TokenID, tok.ReadSessionID) {
			t.Errorf("%s: the token's row holds its session in the clear", name)
		}
		if got := authenticated(t, pool, secret); got.ReadSessionID != tok.ReadSessionID || got.ReadUserID != tok.ReadUserID {
			t.Errorf("%s: authenticates as user %q session %q, want %q %q", name, got.ReadUserID, got.ReadSessionID, tok.ReadUserID, tok.ReadSessionID)
		}
		// A rotation keeps the binding: the new secret reaches what the old one did.
		rotated, info, err := store.Rotate(ctx, "acme", p.TokenID, nil)
		if err != nil {
			t.Fatalf("%s: rotate: %v", name, err)
		}
		if info.ReadSessionID != tok.ReadSessionID || info.ReadUserID != tok.ReadUserID {
			t.Errorf("%s: the rotated token answers user %q session %q", name, info.ReadUserID, info.ReadSessionID)
		}
		if got := authenticated(t, pool, rotated); got.ReadSessionID != tok.ReadSessionID || got.ReadUserID != tok.ReadUserID {
			t.Errorf("%s: the rotated token authenticates as user %q session %q", name, got.ReadUserID, got.ReadSessionID)
		}
		secrets[name] = rotated
	}
	listed, err := store.List(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	sessions := map[string]int{}
	for _, info := range listed {
		sessions[info.ReadSessionID]++
	}
	for name, tok := range bound {
		if sessions[tok.ReadSessionID] != 2 {
			t.Errorf("%s: the list answers the session on %d of its 2 tokens (the rotated and the new)", name, sessions[tok.ReadSessionID])
		}
	}

	// alice's erasure deletes her name with its key (loom.user_names).
	if _, err := pool.Exec(ctx, `DELETE FROM loom.user_names WHERE org = 'acme' AND user_ref = loom.user_ref('acme', 'alice')`); err != nil {
		t.Fatal(err)
	}
	if got := authenticated(t, pool, secrets["user and session"]); got.ReadUserID != auth.ErasedUser || got.ReadSessionID != auth.ErasedSession {
		t.Errorf("after the user's erasure, the token bound to her authenticates as user %q session %q", got.ReadUserID, got.ReadSessionID)
	}
	if got := authenticated(t, pool, secrets["session alone"]); got.ReadSessionID != bound["session alone"].ReadSessionID {
		t.Errorf("after another user's erasure, the token bound to a session alone authenticates as session %q", got.ReadSessionID)
	}
	// Named again (a later write of the same id), the user gets a fresh key, which
	// does not open the session sealed under the erased one.
	if _, err := pool.Exec(ctx, `SELECT loom.named_user('acme', 'alice')`); err != nil {
		t.Fatal(err)
	}
	if got := authenticated(t, pool, secrets["user and session"]); got.ReadSessionID != auth.ErasedSession {
		t.Errorf("after the user is named again, the token bound to her erased self authenticates as session %q", got.ReadSessionID)
	}
}

// Tokens a Loom before migration 179 stored hold their session in the clear
// (read_session_id). The migration seals each in its one transaction, so each
// authenticates as before, and a token whose user was erased before it reaches no
// session.
func TestMigrationSealsExistingTokenSessions(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.MigratedBefore(t, postgres, "179")
	if _, err := pool.Exec(ctx, `WITH ref AS (INSERT INTO loom.user_ref_keys (org, key) VALUES ('acme', gen_random_bytes(32)))
		INSERT INTO loom.name_wrap_keys (org, gen, key) VALUES ('acme', 1, gen_random_bytes(32))`); err != nil {
		t.Fatal(err)
	}
	old := []struct {
		secret, user, session string
		wantUser, wantSession string
	}{
		{secret: "loom_000000000001_a", user: "alice", session: "old-session-of-alice", wantUser: "alice", wantSession: "old-session-of-alice"},
		{secret: "loom_000000000002_b", session: "old-session-alone", wantSession: "old-session-alone"},
		{secret: "loom_000000000003_c", user: "bob", session: "old-session-of-bob", wantUser: auth.ErasedUser, wantSession: auth.ErasedSession},
		{secret: "loom_000000000004_d", user: "carol", wantUser: "carol"},
	}
	for i, o := range old {
		if _, err := pool.Exec(ctx, `INSERT INTO loom.api_tokens (token_id, token_sha256, org, role, read_user_id, read_session_id)
			VALUES ($1, sha256(convert_to($2, 'UTF8')), 'acme', 'reader', loom.named_user('acme', nullif($3, '')), nullif($4, ''))`,
			strings.Repeat("0", 11)+string(rune('1'+i)), o.secret, o.user, o.session); err != nil {
			t.Fatal(err)
		}
	}
	// bob was erased before the upgrade: his name and key are gone.
	if _, err := pool.Exec(ctx, `DELETE FROM loom.user_names WHERE org = 'acme' AND user_ref = loom.user_ref('acme', 'bob')`); err != nil {
		t.Fatal(err)
	}
	pgtest.MigrateRest(t, pool)
	for i, o := range old {
		id := strings.Repeat("0", 11) + string(rune('1'+i))
		if o.session != "" && rowHolds(t, pool, id, o.session) {
			t.Errorf("%s: after the migration, the token's row holds its session in the clear", o.secret)
		}
		if got := authenticated(t, pool, o.secret); got.ReadUserID != o.wantUser || got.ReadSessionID != o.wantSession {
			t.Errorf("%s: authenticates as user %q session %q, want %q %q", o.secret, got.ReadUserID, got.ReadSessionID, o.wantUser, o.wantSession)
		}
	}
}
