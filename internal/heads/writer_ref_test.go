package heads

import (
	"context"
	"testing"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/pgtest"
)

// A writer identity's reference is the same value whether Postgres's statement or Go
// computes it, so a column Postgres wrote and a topic record the relay wrote name an
// agent, a session or a key alike; "-" and "" name no one and stay as they are.
func TestWriterRefsAreTheSameInPostgresAndGo(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Migrated(t, postgres, "acme")
	if _, err := pool.Exec(ctx, `INSERT INTO loom.user_ref_keys (org, key) VALUES ('acme', gen_random_bytes(32)) ON CONFLICT (org) DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	orgKey := pgtest.OrgKey(t, pool, "acme")
	for _, c := range []struct{ key, agent, session string }{
		{"diagnosis-2024", "planner", "sess-77"},
		{"k", "-", "-"},
		{"ключ", "", "x"},
	} {
		var agent, session, key string
		var refs []string
		if err := pool.QueryRow(ctx, `SELECT loom.agent_ref('acme', $1), loom.session_ref('acme', $2), loom.key_ref('acme', $3),
				loom.writer_refs('acme', $3, $1, $2)`, c.agent, c.session, c.key).Scan(&agent, &session, &key, &refs); err != nil {
			t.Fatal(err)
		}
		wantAgent, _ := events.AgentRef(orgKey, c.agent)
		wantSession, _ := events.SessionRef(orgKey, c.session)
		wantKey, _ := events.KeyRef(orgKey, c.key)
		if agent != wantAgent || session != wantSession || key != wantKey {
			t.Errorf("%+v: Postgres %q %q %q, Go %q %q %q", c, agent, session, key, wantAgent, wantSession, wantKey)
		}
		if len(refs) != 3 || refs[0] != key || refs[1] != agent || refs[2] != session {
			t.Errorf("%+v: writer_refs %q, want [%q %q %q]", c, refs, key, agent, session)
		}
		if (c.agent == "-" || c.agent == "") && agent != c.agent {
			t.Errorf("agent %q stored as %q: it names no one", c.agent, agent)
		}
		if c.agent == "planner" && (agent == c.agent || agent == wantSession) {
			t.Errorf("agent reference %q", agent)
		}
	}
	if a, _ := events.AgentRef(orgKey, "same"); a == mustRef(events.SessionRef(orgKey, "same")) || a == mustRef(events.UserRef(orgKey, "same")) {
		t.Error("an agent's reference equals a session's or a user's of the same text")
	}
}

func mustRef(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
