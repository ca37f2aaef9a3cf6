package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// listPage is one page of memory.list or memory.keys.
type listPage struct {
	keys []string
	rows []int // memory.keys: identities per key
	next string
}

func getList(t *testing.T, c *testenv.Client, path string, q url.Values) listPage {
	t.Helper()
	r := c.Do(t, http.MethodGet, path+"?"+q.Encode(), nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s?%s: %d %s", path, q.Encode(), r.Status, r.Body)
	}
	// memory.list's answer or memory.keys's, read as the client's types.
	var a struct {
		client.ListAnswer
		Keys []struct {
			MemoryKey string `json:"memory_key"`
			Rows      int    `json:"rows"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, r.Body)
	}
	p := listPage{next: a.NextPageToken}
	for _, m := range a.Memories {
		p.keys = append(p.keys, m.MemoryKey)
	}
	for _, k := range a.Keys {
		p.keys = append(p.keys, k.MemoryKey)
		p.rows = append(p.rows, k.Rows)
	}
	return p
}

// allPages follows next_page_token to the end and returns every key in order.
func allPages(t *testing.T, c *testenv.Client, path string, q url.Values) (keys []string, pages int) {
	t.Helper()
	for {
		p := getList(t, c, path, q)
		keys = append(keys, p.keys...)
		pages++
		if p.next == "" {
			return keys, pages
		}
		q.Set("page_token", p.next)
	}
}

// memory.list answers what was committed before it, newest first or by key, pages
// without gaps or repeats, and never reads back a row the authority has deleted or
// rewritten since ClickHouse saw it.
func TestMemoryList(t *testing.T) {
	e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only"})
	list := "/v1/namespaces/" + e.ns + "/memories"
	for i := 1; i <= 7; i++ {
		e.ok(fmt.Sprintf("k%d", i), map[string]any{"value": fmt.Sprintf("fact number %d about the list", i),
			"tags": []string{map[bool]string{true: "even", false: "odd"}[i%2 == 0]}})
	}

	// No waiting: the barrier makes the writes just answered visible.
	newest, pages := allPages(t, e.c, list, url.Values{"limit": {"3"}})
	if !sameList(newest, "k7", "k6", "k5", "k4", "k3", "k2", "k1") || pages != 3 {
		t.Fatalf("newest first in pages of 3: %v over %d pages", newest, pages)
	}
	byKey, _ := allPages(t, e.c, list, url.Values{"order": {"key"}, "limit": {"2"}})
	if !sameList(byKey, "k1", "k2", "k3", "k4", "k5", "k6", "k7") {
		t.Fatalf("by key: %v", byKey)
	}
	if p := getList(t, e.c, list, url.Values{"tags": {"even"}}); !sameList(p.keys, "k6", "k4", "k2") {
		t.Fatalf("tags=even: %v", p.keys)
	}

	// A delete and a rewrite are seen at once, whatever ClickHouse holds yet.
	if r := e.c.Do(t, http.MethodDelete, list+"/k3", nil); r.Status != http.StatusOK {
		t.Fatalf("delete k3: %d %s", r.Status, r.Body)
	}
	e.ok("k1", map[string]any{"value": "fact number 1, revised"})
	if p := getList(t, e.c, list, url.Values{}); !sameList(p.keys, "k1", "k7", "k6", "k5", "k4", "k2") {
		t.Fatalf("after deleting k3 and revising k1: %v", p.keys)
	}

	// A token from one order does not page the other; bad limits and orders say which field.
	first := getList(t, e.c, list, url.Values{"limit": {"1"}})
	for _, q := range []url.Values{
		{"order": {"key"}, "page_token": {first.next}},
		{"page_token": {"not-a-token"}},
		{"limit": {"0"}},
		{"limit": {"501"}},
		{"order": {"oldest"}},
		{"status": {"gone"}},
	} {
		r := e.c.Do(t, http.MethodGet, list+"?"+q.Encode(), nil)
		if r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "VALIDATION_FAILED" {
			t.Fatalf("GET ?%s: %d %s, want 422 VALIDATION_FAILED", q.Encode(), r.Status, r.Body)
		}
	}
}

// A user-bound token lists and counts only its user's rows, whatever user_id it asks for.
func TestListAndKeysUnderAUserBoundToken(t *testing.T) {
	n, api := env.SharedAPI(t)
	ns := testenv.Unique(t, "lk")
	admin := testenv.NewClient(api, env.Token(t, n, auth.NewToken{Org: "acme"}))
	admin.AppendOnly(t, ns)
	for _, w := range []struct{ key, user, value string }{
		{"pref.drink", "alice", "alice drinks tea"},
		{"pref.drink", "bob", "bob drinks coffee"},
		{"pref.food", "bob", "bob eats rice"},
		{"home.city", "alice", "alice lives in Lyon"},
	} {
		b := fmt.Sprintf(`{"value": %q, "user_id": %q}`, w.value, w.user)
		if r := admin.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/"+w.key, []byte(b)); r.Status != http.StatusOK {
			t.Fatalf("set: %d %s", r.Status, r.Body)
		}
	}
	alice := testenv.NewClient(api, env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleReader, ReadUserID: "alice"}))
	list := "/v1/namespaces/" + ns + "/memories"
	keys := "/v1/namespaces/" + ns + "/keys"

	if p := getList(t, alice, list, url.Values{"order": {"key"}}); !sameList(p.keys, "home.city", "pref.drink") {
		t.Fatalf("alice's list: %v", p.keys)
	}
	if p := getList(t, alice, list, url.Values{"user_id": {"bob"}}); len(p.keys) != 0 {
		t.Fatalf("alice's token listed bob's rows: %v", p.keys)
	}

	// memory.keys waits at the barrier: every key just written is counted.
	all := getList(t, admin, keys, url.Values{})
	if !sameList(all.keys, "home.city", "pref.drink", "pref.food") || all.rows[1] != 2 {
		t.Fatalf("keys: %v rows %v", all.keys, all.rows)
	}
	if p := getList(t, admin, keys, url.Values{"prefix": {"pref."}, "limit": {"1"}}); !sameList(p.keys, "pref.drink") || p.next == "" {
		t.Fatalf("keys prefix=pref. limit=1: %v next %q", p.keys, p.next)
	}
	if p := getList(t, alice, keys, url.Values{}); !sameList(p.keys, "home.city", "pref.drink") || p.rows[1] != 1 {
		t.Fatalf("alice's keys: %v rows %v", p.keys, p.rows)
	}
}
