package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

func TestBadInputAnswers422NamingTheField(t *testing.T) {
	n, url := env.SharedAPI(t)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "bad")
	long := strings.Repeat("x", 257)
	overLimit := `{"value": "` + strings.Repeat("a", 16001) + `"}`
	cases := []struct {
		name, key, body, code, field string
	}{
		{"malformed JSON", "k", `{"value": "unterminated`, "VALIDATION_FAILED", "body"},
		{"trailing data", "k", `{"value": 1} {"value": 2}`, "VALIDATION_FAILED", "body"},
		{"missing value", "k", `{"tags": ["a"]}`, "VALIDATION_FAILED", "value"},
		{"empty body", "k", ``, "VALIDATION_FAILED", "body"},
		{"unknown field", "k", `{"value": 1, "valeu": 2}`, "VALIDATION_FAILED", "valeu"},
		{"NUL escape in value", "k", `{"value": "a\u0000b"}`, "VALIDATION_FAILED", "body"},
		{"lone surrogate in value", "k", `{"value": "a\ud800b"}`, "VALIDATION_FAILED", "body"},
		{"lone surrogate in a tag", "k", `{"value": 1, "tags": ["\udc00"]}`, "VALIDATION_FAILED", "body"},
		{"NUL in agent", "k", `{"value": 1, "agent": "a\u0000"}`, "VALIDATION_FAILED", "body"},
		{"oversized key", long, `{"value": 1}`, "VALIDATION_FAILED", "memory_key"},
		{"NUL in key", "a%00b", `{"value": 1}`, "VALIDATION_FAILED", "memory_key"},
		{"value over the char limit", "k", overLimit, "CHAR_LIMIT_EXCEEDED", "value"},
		{"confidence out of range", "k", `{"value": 1, "confidence": 2}`, "VALIDATION_FAILED", "confidence"},
		{"tags of the wrong type", "k", `{"value": 1, "tags": "a"}`, "VALIDATION_FAILED", "tags"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The raw body is the case; the answer is read as the client's error.
			status, body, err := c.Typed(t).Raw(context.Background(), http.MethodPut, "/v1/namespaces/"+ns+"/memories/"+tc.key, []byte(tc.body))
			e, _ := client.AsError(client.ErrorOf(status, body))
			if err != nil || e == nil || e.Status != http.StatusUnprocessableEntity || string(e.Code) != tc.code {
				t.Fatalf("got %d %s (%v), want 422 %s", status, body, err, tc.code)
			}
			if e.Field != tc.field || e.Retryable || e.Message == "" {
				t.Fatalf("error envelope %+v, want field %q, not retryable, a message", e, tc.field)
			}
		})
	}
	// None of the refused writes reached the store.
	r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/k", nil)
	if r.Status != http.StatusNotFound || r.ErrorCode() != "RESOURCE_NOT_FOUND" {
		t.Fatalf("a refused write left a memory: %d %s", r.Status, r.Body)
	}
	// A namespace name that cannot be a Kafka key's part is refused too.
	r = c.Do(t, http.MethodPut, "/v1/namespaces/bad%2Fname/memories/k", []byte(`{"value": 1}`))
	if r.Status != http.StatusUnprocessableEntity && r.Status != http.StatusNotFound {
		t.Fatalf("namespace with a slash: %d %s", r.Status, r.Body)
	}
	// A search asking for more than the ceiling is refused.
	r = c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", []byte(`{"query": "x", "top_k": 1000}`))
	if r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "VALIDATION_FAILED" {
		t.Fatalf("top_k above the ceiling: %d %s", r.Status, r.Body)
	}
}

func TestMissingOrWrongTokenIs401(t *testing.T) {
	n, url := env.API(t, nil)
	good := env.Token(t, n, auth.NewToken{Org: "acme"})
	ns := testenv.Unique(t, "auth")
	for name, token := range map[string]string{
		"no token":       "",
		"unknown token":  "loom_000000000000_bm90LWEtcmVhbC10b2tlbg",
		"garbage":        "not-a-token",
		"almost the key": good[:len(good)-1] + "x",
	} {
		t.Run(name, func(t *testing.T) {
			c := testenv.NewClient(url, token)
			for _, call := range testenv.MemoryCalls(ns) {
				if r := c.Call(t, call); r.Status != http.StatusUnauthorized || r.ErrorCode() != "UNAUTHENTICATED" {
					t.Fatalf("%s %s: %d %s, want 401 UNAUTHENTICATED", call.Method, call.Path, r.Status, r.Body)
				}
			}
		})
	}
	// Health and metrics need no token (readiness waits for the search index to warm).
	testenv.Eventually(t, 30*time.Second, "the process to be ready", func() bool {
		return testenv.NewClient(url, "").Do(t, http.MethodGet, "/v1/health/ready", nil).Status == http.StatusOK
	})
	for _, path := range []string{"/v1/health", "/v1/health/ready", "/metrics"} {
		if r := testenv.NewClient(url, "").Do(t, http.MethodGet, path, nil); r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, r.Status, r.Body)
		}
	}
}

// The token decides the org: nothing a token of one org does reaches another org's rows.
func TestTokenNeverReachesAnotherOrg(t *testing.T) {
	n, url := env.SharedAPI(t)
	alice := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "org-a"}))
	bob := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "org-b"}))
	ns := testenv.Unique(t, "iso")
	a := typedSet(t, alice, ns, "secret-plan", client.SetRequest{Value: "org a plans to launch on monday"})

	if r := bob.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/secret-plan", nil); r.Status != http.StatusNotFound {
		t.Fatalf("org b read org a's key: %d %s", r.Status, r.Body)
	}
	if r := bob.Do(t, http.MethodGet, "/v1/memories/"+a.MemoryID, nil); r.Status != http.StatusNotFound {
		t.Fatalf("org b read org a's memory by id: %d %s", r.Status, r.Body)
	}
	if r := bob.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/secret-plan/history", nil); r.Status != http.StatusNotFound {
		t.Fatalf("org b read org a's history: %d %s", r.Status, r.Body)
	}
	if got := typedSearch(t, bob, ns, client.SearchRequest{Query: "org a plans to launch on monday", TopK: 10}).Hits; len(got) != 0 {
		t.Fatalf("org b's search found org a's memory: %+v", got)
	}
	// Bob writing the same namespace and key makes his own row; Alice's is untouched.
	bob.Set(t, ns, "secret-plan", "org b has its own plan")
	if m, err := alice.Typed(t).GetByID(context.Background(), a.MemoryID); err != nil || string(m.Value) != `"org a plans to launch on monday"` {
		t.Fatalf("org a's memory after org b's write: %v %+v", err, m)
	}
}

// A token limited to some namespaces, or to one user's rows, sees nothing else; a
// reader token cannot write.
func TestTokenScopes(t *testing.T) {
	n, url := env.SharedAPI(t)
	ns := testenv.Unique(t, "scope")
	other := testenv.Unique(t, "other")
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	admin.Set(t, other, "k", "in another namespace")
	b := []byte(`{"value": "alice likes tea", "user_id": "alice"}`)
	if r := admin.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/drink", b); r.Status != http.StatusOK {
		t.Fatalf("set: %d %s", r.Status, r.Body)
	}
	b = []byte(`{"value": "bob likes coffee", "user_id": "bob"}`)
	if r := admin.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/drink", b); r.Status != http.StatusOK {
		t.Fatalf("set: %d %s", r.Status, r.Body)
	}

	limited := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleReader, Namespaces: []string{ns}, ReadUserID: "alice"}))
	if r := limited.Do(t, http.MethodGet, "/v1/namespaces/"+other+"/memories/k", nil); r.Status != http.StatusNotFound {
		t.Fatalf("namespace-limited token read another namespace: %d %s", r.Status, r.Body)
	}
	if m, err := limited.Typed(t).Get(context.Background(), ns, "drink", client.Identity{}, time.Time{}); err != nil || string(m.Value) != `"alice likes tea"` {
		t.Fatalf("user-bound token reading its user's row: %v %+v", err, m)
	}
	if r := limited.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/drink?user_id=bob", nil); r.Status != http.StatusNotFound {
		t.Fatalf("user-bound token read another user's row: %d %s", r.Status, r.Body)
	}
	for _, h := range typedSearch(t, limited, ns, client.SearchRequest{Query: "likes coffee tea", TopK: 10}).Hits {
		if h.UserID != "alice" {
			t.Fatalf("user-bound token's search served %v's row", h.UserID)
		}
	}
	if r := limited.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/x", []byte(`{"value": 1}`)); r.Status != http.StatusForbidden || r.ErrorCode() != "PERMISSION_DENIED" {
		t.Fatalf("reader token wrote: %d %s", r.Status, r.Body)
	}
}

func TestGetByID(t *testing.T) {
	n, url := env.SharedAPI(t)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "byid")
	set := typedSet(t, c, ns, "k", client.SetRequest{Value: []any{"a", 2, true}})
	got, err := c.Typed(t).GetByID(context.Background(), set.MemoryID)
	if err != nil {
		t.Fatalf("get by id: %v", err)
	}
	if got.MemoryKey != "k" || got.Namespace != ns || got.VersionText != set.VersionText {
		t.Fatalf("get by id answered %+v", got)
	}
	for _, id := range []string{"not-a-uuid", "00000000-0000-0000-0000-000000000000"} {
		if r := c.Do(t, http.MethodGet, "/v1/memories/"+id, nil); r.Status != http.StatusNotFound {
			t.Fatalf("get by id %s: %d %s", id, r.Status, r.Body)
		}
	}
}
