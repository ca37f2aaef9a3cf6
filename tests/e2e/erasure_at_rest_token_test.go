package e2e

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// tokenSessionShredded has the flow of TestErasureLeavesNothingAtRest create a token
// bound to the erased user and to a session marker and use it (it answers its session,
// and searches as it), checks that the token's row holds the session only sealed
// (migration 179: under the user's name key), and answers the check to run after the
// erasure, its VACUUM and its CHECKPOINT: the token now authenticates as no user and
// no session, and no file of Postgres's data directory, the WAL included, holds the
// session marker.
func tokenSessionShredded(t *testing.T, n *app.Process, c *testenv.Client, pool *pgxpool.Pool, org, ns, user string) (afterErasure func()) {
	t.Helper()
	session := "token-session-" + marker(t)
	secret := env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: user, ReadSessionID: session})
	bound := testenv.NewClient(c.URL, secret)
	self := bound.Do(t, http.MethodGet, "/v1/token", nil)
	if self.Status != http.StatusOK {
		t.Fatalf("the session-bound token's own description: %d %s", self.Status, self.Body)
	}
	if got := self.JSON(t); got["read_session_id"] != session || got["read_user_id"] != user {
		t.Fatalf("the session-bound token answers user %v session %v, want %s %s", got["read_user_id"], got["read_session_id"], user, session)
	}
	if r := bound.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", []byte(`{"query": "vault code"}`)); r.Status != http.StatusOK {
		t.Fatalf("search as the session-bound token: %d %s", r.Status, r.Body)
	}
	if found := tablesHolding(t, pool, org, session, "loom.api_tokens"); len(found) > 0 {
		t.Errorf("before the erasure, the token's row holds its session in the clear")
	}
	return func() {
		t.Helper()
		p, err := auth.NewStore(pool).Authenticate(context.Background(), secret)
		if err != nil {
			t.Fatalf("authenticate the token bound to the erased user: %v", err)
		}
		if p.ReadUserID != auth.ErasedUser || p.ReadSessionID != auth.ErasedSession {
			t.Errorf("after the erasure, the token bound to the erased user authenticates as user %q session %q", p.ReadUserID, p.ReadSessionID)
		}
		if found := filesHolding(t, env.Stack.Postgres.DataDir(), session); len(found) > 0 {
			t.Errorf("Postgres files still hold the erased user's token's session: %v", pgRelations(t, pool, found))
		}
	}
}
