package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// An erasure of a user ends what every process's token cache still answers for a
// token bound to the user: the process that ran it at once, another as soon as the
// erasure's NOTIFY reaches it, far inside the cache's TTL (an hour here, so the TTL
// cannot explain it). Until then a process answered the token as the user from its
// cache and let it write as the user again.
func TestErasureEndsTheErasedUsersCachedToken(t *testing.T) {
	longCache := func(c *config.Config) { c.HTTP.TokenCache = time.Hour }
	a, urlA := env.API(t, longCache)
	_, urlB := env.API(t, longCache)
	org, ns, user := testenv.Unique(t, "org"), testenv.Unique(t, "cache"), "alice"
	admin := testenv.NewClient(urlA, env.Token(t, a, auth.NewToken{Org: org}))
	secret := env.Token(t, a, auth.NewToken{Org: org, Role: auth.RoleWriter, ReadUserID: user})
	onA, onB := testenv.NewClient(urlA, secret), testenv.NewClient(urlB, secret)

	readUser := func(c *testenv.Client) any {
		t.Helper()
		r := c.Do(t, http.MethodGet, "/v1/token", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("the token's own description on %s: %d %s", c.URL, r.Status, r.Body)
		}
		return r.JSON(t)["read_user_id"]
	}
	writeAsUser := func(c *testenv.Client, key string) int {
		t.Helper()
		return c.Put(t, ns, key, map[string]any{"value": "a fact of " + user, "user_id": user}).Status
	}
	// Each process checks the token and caches its principal.
	for i, c := range []*testenv.Client{onA, onB} {
		if status := writeAsUser(c, "before-"+string(rune('a'+i))); status != http.StatusOK {
			t.Fatalf("a write as %s on %s before the erasure: %d", user, c.URL, status)
		}
		if got := readUser(c); got != user {
			t.Fatalf("before the erasure the token reads as %v, want %s", got, user)
		}
	}

	admin.Erase(t, map[string]any{"user_id": user})

	if got := readUser(onA); got == user {
		t.Errorf("the process that erased %s still answers its token as %s from its cache", user, user)
	}
	if status := writeAsUser(onA, "after-a"); status != http.StatusForbidden {
		t.Errorf("a write as the erased user on the erasing process: %d, want 403", status)
	}
	start := time.Now()
	testenv.Eventually(t, 5*time.Second, "the other process to stop answering the token as the erased user",
		func() bool { return readUser(onB) != user })
	t.Logf("the other process stopped answering the erased user's token after %s (cache TTL 1h)", time.Since(start).Round(time.Millisecond))
	if status := writeAsUser(onB, "after-b"); status != http.StatusForbidden {
		t.Errorf("a write as the erased user on the other process: %d, want 403", status)
	}
}

// A user known only from a token bound to them (no row names them) is erased too: the
// erasure finds no namespace of theirs, and still takes their name, so the token stops
// acting as the user.
func TestErasingAUserWhoNeverWroteEndsTheirToken(t *testing.T) {
	a, url := env.API(t, nil)
	org, ns, user := testenv.Unique(t, "org"), testenv.Unique(t, "ghost"), "ghost"
	admin := testenv.NewClient(url, env.Token(t, a, auth.NewToken{Org: org}))
	bound := testenv.NewClient(url, env.Token(t, a, auth.NewToken{Org: org, Role: auth.RoleWriter, ReadUserID: user}))
	readUser := func() any {
		t.Helper()
		r := bound.Do(t, http.MethodGet, "/v1/token", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("the token's own description: %d %s", r.Status, r.Body)
		}
		return r.JSON(t)["read_user_id"]
	}
	if got := readUser(); got != user {
		t.Fatalf("before the erasure the token reads as %v, want %s", got, user)
	}
	admin.Erase(t, map[string]any{"user_id": user})
	if got := readUser(); got == user {
		t.Errorf("after the erasure of %s, who never wrote, the token still reads as %s", user, user)
	}
	if status := bound.Put(t, ns, "after", map[string]any{"value": "a fact of " + user, "user_id": user}).Status; status != http.StatusForbidden {
		t.Errorf("a write as the erased user: %d, want 403", status)
	}
}
