package e2e

import (
	"net/http"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

func hits(t *testing.T, r *testenv.Response) []map[string]any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("search: %d %s", r.Status, r.Body)
	}
	var out []map[string]any
	for _, h := range r.JSON(t)["hits"].([]any) {
		out = append(out, h.(map[string]any))
	}
	return out
}

// A write is searchable on the very next call: the search waits at the barrier until
// the projector has written it, with no sleep anywhere.
func TestWriteThenSearchImmediately(t *testing.T) {
	n, url := env.API(t, nil)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "ws")
	set := c.Set(t, ns, "editor-theme", "the user prefers dark mode in the editor")
	c.Set(t, ns, "invoice", "the invoice for march is due on friday")

	r := c.Search(t, ns, "which editor theme does the user prefer", 5)
	got := hits(t, r)
	if len(got) == 0 || got[0]["memory_key"] != "editor-theme" {
		t.Fatalf("top hit is not the memory just written: %s", r.Body)
	}
	if got[0]["memory_id"] != set["memory_id"] || got[0]["value"] != "the user prefers dark mode in the editor" {
		t.Fatalf("hit does not carry the written memory: %v", got[0])
	}
	if got[0]["version"].(float64) != set["version"].(float64) {
		t.Fatalf("hit version %v, written %v", got[0]["version"], set["version"])
	}
	for i, h := range got {
		if _, ok := h["scores"].(map[string]any)["vector"]; !ok {
			t.Fatalf("hit %d carries no vector score: %v", i, h)
		}
		if i > 0 && h["score"].(float64) > got[i-1]["score"].(float64) {
			t.Fatalf("hits are not ranked by score: %s", r.Body)
		}
	}
	body := r.JSON(t)
	if body["verdict"] != "ok" {
		t.Fatalf("verdict %v, want ok", body["verdict"])
	}
}

// Revising a key serves only the new value from search, and history keeps both.
func TestReviseServesOnlyTheNewValueAndKeepsHistory(t *testing.T) {
	n, url := env.API(t, nil)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "rev")
	first := c.Set(t, ns, "home-city", "the user lives in Lisbon, Portugal")
	second := c.Set(t, ns, "home-city", "the user lives in Berlin, Germany")
	if second["memory_id"] != first["memory_id"] {
		t.Fatalf("a revision changed the memory id: %v then %v", first["memory_id"], second["memory_id"])
	}
	if second["version"].(float64) <= first["version"].(float64) || second["event"] != "memory.revised" {
		t.Fatalf("revision: %v", second)
	}

	for _, q := range []string{"the user lives in Lisbon", "the user lives in Berlin"} {
		got := hits(t, c.Search(t, ns, q, 10))
		if len(got) != 1 {
			t.Fatalf("search %q: %d hits, want exactly the key's current row", q, len(got))
		}
		if got[0]["value"] != "the user lives in Berlin, Germany" {
			t.Fatalf("search %q served %v, want the new value", q, got[0]["value"])
		}
	}

	r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/home-city/history", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("history: %d %s", r.Status, r.Body)
	}
	versions := r.JSON(t)["versions"].([]any)
	if len(versions) != 2 {
		t.Fatalf("history has %d versions, want 2: %s", len(versions), r.Body)
	}
	v0, v1 := versions[0].(map[string]any), versions[1].(map[string]any)
	if v0["value"] != "the user lives in Lisbon, Portugal" || v1["value"] != "the user lives in Berlin, Germany" {
		t.Fatalf("history out of order or wrong: %s", r.Body)
	}
	if v0["event"] != "memory.written" || v1["event"] != "memory.revised" {
		t.Fatalf("history events: %v, %v", v0["event"], v1["event"])
	}
}

// A byte-identical restatement writes a new version that reinforces the fact.
func TestRestatementReinforces(t *testing.T) {
	n, url := env.API(t, nil)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "re")
	a := c.Set(t, ns, "k", map[string]any{"b": 1, "a": "x"})
	// The same object with its keys in another order is the same canonical value.
	b := c.Set(t, ns, "k", map[string]any{"a": "x", "b": 1})
	if a["content_sha256"] != b["content_sha256"] {
		t.Fatalf("same value, different hashes: %v %v", a["content_sha256"], b["content_sha256"])
	}
	if b["reinforcement_count"].(float64) != 1 || b["version"].(float64) <= a["version"].(float64) {
		t.Fatalf("restatement: %v", b)
	}
	r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/k", nil)
	got := r.JSON(t)
	if got["reinforcement_count"].(float64) != 1 || got["version_text"] != b["version_text"] {
		t.Fatalf("get after restatement: %s", r.Body)
	}
}
