package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// A token bound to one session (own_session) reads that session's rows alone: its
// searches, lists and point reads never show another session's, its writes land in
// its session and may not name another, and what acts on every session is refused.
func TestOwnSessionTokenReadsOnlyItsSession(t *testing.T) {
	n, admin, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "sessions")
	admin.AppendOnly(t, ns)
	put := func(key, session, value string) map[string]any {
		t.Helper()
		r := admin.Put(t, ns, key, map[string]any{"value": value, "user_id": "alice", "session_id": session})
		if r.Status != http.StatusOK {
			t.Fatalf("write %s in %s: %d %s", key, session, r.Status, r.Body)
		}
		return r.JSON(t)
	}
	put("drink", "s1", "alice drinks jasmine tea in the first session")
	other := put("drink", "s2", "alice drinks kumquat tea in the second session")
	put("snack", "s2", "alice eats kumquat biscuits with her tea")

	tok := testenv.NewClient(admin.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter, ReadSessionID: "s1"}))
	noKumquat := func(what string, r *testenv.Response, want int) {
		t.Helper()
		if r.Status != want {
			t.Fatalf("%s: %d %s; want %d", what, r.Status, r.Body, want)
		}
		if strings.Contains(string(r.Body), "kumquat") {
			t.Fatalf("%s: the session-bound token read another session's row: %s", what, r.Body)
		}
	}
	r := tok.Search(t, ns, "what tea does alice drink", 10)
	noKumquat("search", r, http.StatusOK)
	if !strings.Contains(string(r.Body), "jasmine") {
		t.Fatalf("search: the token's own session's row is not found: %s", r.Body)
	}
	noKumquat("search naming the other session", tok.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search",
		[]byte(`{"query": "which tea does alice drink", "session_id": "s2"}`)), http.StatusOK)
	noKumquat("list", tok.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories", nil), http.StatusOK)
	noKumquat("get of the other session", tok.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/drink?user_id=alice&session_id=s2", nil), http.StatusNotFound)
	noKumquat("get by id", tok.Do(t, http.MethodGet, "/v1/memories/"+other["memory_id"].(string), nil), http.StatusNotFound)
	noKumquat("bulk get", tok.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:bulkGet",
		[]byte(`{"keys": [{"memory_key": "snack", "user_id": "alice", "session_id": "s2"}], "ids": ["`+other["memory_id"].(string)+`"]}`)), http.StatusOK)
	if g := tok.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/drink?user_id=alice", nil); g.Status != http.StatusOK || !strings.Contains(string(g.Body), "jasmine") {
		t.Fatalf("get of its own session's row: %d %s", g.Status, g.Body)
	}

	// Writes land in the token's session; naming another is refused.
	w := tok.Put(t, ns, "mood", map[string]any{"value": "alice is cheerful today", "user_id": "alice"})
	if w.Status != http.StatusOK || w.JSON(t)["session_id"] != "s1" {
		t.Fatalf("a write of the session-bound token: %d %s; want it in s1", w.Status, w.Body)
	}
	if w := tok.Put(t, ns, "drink", map[string]any{"value": "overwritten", "user_id": "alice", "session_id": "s2"}); w.Status != http.StatusForbidden {
		t.Fatalf("a write into another session: %d %s; want 403", w.Status, w.Body)
	}
	if d := tok.Do(t, http.MethodDelete, "/v1/namespaces/"+ns+"/memories/drink?user_id=alice&session_id=s2", nil); d.Status != http.StatusNotFound {
		t.Fatalf("a delete in another session: %d %s; want 404", d.Status, d.Body)
	}
	if got := testenv.PGStrings(t, env.PG(t), `SELECT count(*)::text FROM loom.memory_current WHERE org = $1 AND namespace = $2 AND session_id = loom.session_ref($1, 's2') AND NOT (row->>'tombstone')::boolean`,
		org, ns); len(got) != 1 || got[0] != "2" {
		t.Fatalf("the other session's live rows: %v; want both untouched", got)
	}
	// What acts on every session is refused.
	self := tok.Do(t, http.MethodGet, "/v1/token", nil)
	if !strings.Contains(string(self.Body), `"read_session_id":"s1"`) {
		t.Fatalf("token.self does not name the token's session: %s", self.Body)
	}
	if r := tok.Do(t, http.MethodPost, "/v1/erasures", []byte(`{"user_id": "alice"}`)); r.Status != http.StatusForbidden {
		t.Fatalf("a session-bound token erasing its user: %d %s; want 403", r.Status, r.Body)
	}
}
