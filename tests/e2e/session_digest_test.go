package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
	loomworkers "github.com/loomplane/loom/workers"
)

// workersFromNow moves every worker's consumer group to the topic's end, before a test
// writes what the workers process it starts is to read: that process then reads the
// test's records, not the backlog of the package's earlier tests (over which a
// session_digest pass digested every conversation of the package first).
func workersFromNow(t *testing.T) {
	t.Helper()
	for _, w := range loomworkers.Names() {
		env.ResetGroup(t, loomworkers.Group(w), "latest")
	}
}

// A redaction of a memory drawn from a session's turn drops the session's digest,
// which may restate what the redaction scrubs; the session_digest pass may write it
// again, from the turns left.
func TestRedactionDropsTheSessionsDigest(t *testing.T) {
	workersFromNow(t)
	e := newConversationEnv(t)
	ctx := context.Background()
	s1, _ := e.aliceConversation()
	e.srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		if r.SchemaName != "session_digest" {
			return llmtest.Status(500, "unscripted")
		}
		if r.Contains("Santa Maria") {
			return llmtest.JSON(map[string]any{"digest": "Alice works night shifts as a nurse at Santa Maria hospital"})
		}
		return llmtest.JSON(map[string]any{"digest": "Alice talked about her work"})
	})
	_, _, stop := env.Serve(t, []string{"workers"}, func(c *config.Config) {
		withProvider(e.srv)(c)
		c.Workers.Resolver.Enabled, c.Workers.Entities.Enabled, c.Workers.Profiles.Enabled = false, false, false
		c.Workers.SessionDigest.Enabled, c.Workers.SessionDigest.MinTurns = true, 2
		c.Workers.SessionDigest.Idle, c.Workers.SessionDigest.Interval = time.Hour, 100*time.Millisecond
	})
	defer stop()
	path := "/v1/namespaces/" + e.ns + "/sessions/s1/digest"
	testenv.Eventually(t, 30*time.Second, "the digest of alice's first session", func() bool {
		r := e.c.Do(t, http.MethodGet, path, nil)
		return r.Status == http.StatusOK && strings.Contains(string(r.Body), "Santa Maria")
	})

	alice := client.Identity{UserID: "alice", SessionID: "s1"}
	if _, err := e.tc.Delete(ctx, e.ns, "user.job", alice, ""); err != nil {
		t.Fatal(err)
	}
	a, err := e.tc.Redact(ctx, e.ns, "user.job", client.RedactRequest{Version: byKey(s1)["user.job"].VersionText, Identity: alice})
	if err != nil || a.ForgottenTurns != 1 {
		t.Fatalf("the redaction: %+v, %v; want one turn forgotten", a, err)
	}
	if r := e.c.Do(t, http.MethodGet, path, nil); r.Status != http.StatusNotFound && strings.Contains(string(r.Body), "Santa Maria") {
		t.Fatalf("the session's digest after the redaction: %d %s", r.Status, r.Body)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.session_summaries WHERE org = $1 AND namespace = $2 AND session_id = loom.session_ref(org, 's1')
		AND window_end = 3 AND turns = 4`, e.org, e.ns); n != 0 {
		t.Fatalf("the digest of the redacted turn's window is kept")
	}
}
