package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// A token bound to a session and no user seals its session under a key of its own. An
// erasure that removes the last rows naming the session (a user's, whose rows the
// session held alone; a namespace's) destroys that key: the token reads as no session
// and reaches no row written in the session later. A session still naming rows
// (another user's) keeps its token, and so does one that named none. Until then no
// erasure reached such a token: it still answered its session and read what was
// written in it after the erasure.
func TestAnErasureOfASessionsLastRowsEndsItsSessionToken(t *testing.T) {
	a, url := env.API(t, nil)
	org, ns, other := testenv.Unique(t, "org"), testenv.Unique(t, "sess"), testenv.Unique(t, "sessns")
	admin := testenv.NewClient(url, env.Token(t, a, auth.NewToken{Org: org}))
	sessionToken := func(session string) *testenv.Client {
		return testenv.NewClient(url, env.Token(t, a, auth.NewToken{Org: org, Role: auth.RoleReader, ReadSessionID: session}))
	}
	put := func(ns, key, user, session, value string) {
		t.Helper()
		r := admin.Put(t, ns, key, map[string]any{"value": value, "user_id": user, "session_id": session})
		if r.Status != http.StatusOK {
			t.Fatalf("write %s of %s in %s: %d %s", key, user, session, r.Status, r.Body)
		}
	}
	readSession := func(c *testenv.Client) any {
		t.Helper()
		r := c.Do(t, http.MethodGet, "/v1/token", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("the token's own description: %d %s", r.Status, r.Body)
		}
		return r.JSON(t)["read_session_id"]
	}
	reads := func(c *testenv.Client, ns, value string) bool {
		t.Helper()
		r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("list %s: %d %s", ns, r.Status, r.Body)
		}
		return strings.Contains(string(r.Body), value)
	}

	put(ns, "tea", "alice", "alice-chat-0412", "alice drinks jasmine tea")
	put(ns, "tea", "alice", "team-standup", "alice drinks oolong at the standup")
	put(ns, "coffee", "bob", "team-standup", "bob drinks espresso at the standup")
	put(other, "plan", "dave", "dave-plans", "dave plans a trip to lisbon")
	alone, shared, fresh, namespaced := sessionToken("alice-chat-0412"), sessionToken("team-standup"),
		sessionToken("not-yet-written"), sessionToken("dave-plans")
	if !reads(alone, ns, "jasmine") || !reads(namespaced, other, "lisbon") {
		t.Fatal("before the erasures a session token does not read its session's rows")
	}

	admin.Erase(t, map[string]any{"user_id": "alice"})
	if got := readSession(alone); got == "alice-chat-0412" {
		t.Errorf("after the erasure of the session's only user, its token still reads as session %v", got)
	}
	if got := readSession(shared); got != "team-standup" {
		t.Errorf("a session bob's rows still name reads as %v after alice's erasure, want team-standup", got)
	}
	if got := readSession(fresh); got != "not-yet-written" {
		t.Errorf("a session that named no row reads as %v after alice's erasure, want not-yet-written", got)
	}
	put(ns, "tea", "carol", "alice-chat-0412", "carol drinks rooibos")
	if reads(alone, ns, "rooibos") {
		t.Error("the token of the erased session reads a row written in that session after the erasure")
	}
	if !reads(shared, ns, "espresso") {
		t.Error("the token of the session bob's rows still name no longer reads them")
	}

	admin.Erase(t, map[string]any{"namespace": other})
	if got := readSession(namespaced); got == "dave-plans" {
		t.Errorf("after the erasure of the only namespace the session wrote in, its token still reads as session %v", got)
	}
}
