package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
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

// typedSearch runs memory.search through the typed client; an error fails the test.
func typedSearch(t *testing.T, c *testenv.Client, ns string, req client.SearchRequest) *client.SearchAnswer {
	t.Helper()
	a, err := c.Typed(t).Search(context.Background(), ns, req)
	if err != nil {
		t.Fatalf("search %+v: %v", req, err)
	}
	return a
}

// typedSet runs memory.set through the typed client; an error fails the test.
func typedSet(t *testing.T, c *testenv.Client, ns, key string, req client.SetRequest) *client.SetAnswer {
	t.Helper()
	a, err := c.Typed(t).Set(context.Background(), ns, key, req)
	if err != nil {
		t.Fatalf("set %s/%s: %v", ns, key, err)
	}
	return a
}

// A write is searchable on the very next call: the search waits at the barrier until
// the projector has written it, with no sleep anywhere.
func TestWriteThenSearchImmediately(t *testing.T) {
	n, url := env.SharedAPI(t)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "ws")
	set := typedSet(t, c, ns, "editor-theme", client.SetRequest{Value: "the user prefers dark mode in the editor"})
	typedSet(t, c, ns, "invoice", client.SetRequest{Value: "the invoice for march is due on friday"})

	a := typedSearch(t, c, ns, client.SearchRequest{Query: "which editor theme does the user prefer", TopK: 5})
	got := a.Hits
	if len(got) == 0 || got[0].MemoryKey != "editor-theme" {
		t.Fatalf("top hit is not the memory just written: %+v", a)
	}
	if got[0].MemoryID != set.MemoryID || string(got[0].Value) != `"the user prefers dark mode in the editor"` {
		t.Fatalf("hit does not carry the written memory: %+v", got[0])
	}
	if got[0].Version != set.Version {
		t.Fatalf("hit version %d, written %d", got[0].Version, set.Version)
	}
	// Every hit says its vector score (the typed answer cannot tell it absent from 0).
	var legs struct {
		Hits []struct{ Scores map[string]float64 }
	}
	json.Unmarshal(c.Search(t, ns, "which editor theme does the user prefer", 5).Body, &legs)
	for i, h := range legs.Hits {
		if _, ok := h.Scores["vector"]; !ok {
			t.Fatalf("hit %d carries no vector score: %+v", i, h)
		}
	}
	for i, h := range got {
		if i > 0 && h.Score > got[i-1].Score {
			t.Fatalf("hits are not ranked by score: %+v", got)
		}
	}
	if a.Verdict != client.VerdictOK {
		t.Fatalf("verdict %v, want ok", a.Verdict)
	}
}

// Revising a key serves only the new value from search, and history keeps both.
func TestReviseServesOnlyTheNewValueAndKeepsHistory(t *testing.T) {
	n, url := env.SharedAPI(t)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "rev")
	first := typedSet(t, c, ns, "home-city", client.SetRequest{Value: "the user lives in Lisbon, Portugal"})
	second := typedSet(t, c, ns, "home-city", client.SetRequest{Value: "the user lives in Berlin, Germany"})
	if second.MemoryID != first.MemoryID {
		t.Fatalf("a revision changed the memory id: %v then %v", first.MemoryID, second.MemoryID)
	}
	if second.Version <= first.Version || second.Event != "memory.revised" {
		t.Fatalf("revision: %+v", second)
	}

	for _, q := range []string{"the user lives in Lisbon", "the user lives in Berlin"} {
		got := typedSearch(t, c, ns, client.SearchRequest{Query: q, TopK: 10}).Hits
		if len(got) != 1 {
			t.Fatalf("search %q: %d hits, want exactly the key's current row", q, len(got))
		}
		if string(got[0].Value) != `"the user lives in Berlin, Germany"` {
			t.Fatalf("search %q served %s, want the new value", q, got[0].Value)
		}
	}

	h, err := c.Typed(t).History(context.Background(), ns, "home-city", client.Identity{})
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	if len(h.Versions) != 2 {
		t.Fatalf("history has %d versions, want 2: %+v", len(h.Versions), h)
	}
	v0, v1 := h.Versions[0], h.Versions[1]
	if string(v0.Value) != `"the user lives in Lisbon, Portugal"` || string(v1.Value) != `"the user lives in Berlin, Germany"` {
		t.Fatalf("history out of order or wrong: %+v", h.Versions)
	}
	if v0.Event != "memory.written" || v1.Event != "memory.revised" {
		t.Fatalf("history events: %v, %v", v0.Event, v1.Event)
	}
}

// A byte-identical restatement writes a new version that reinforces the fact.
func TestRestatementReinforces(t *testing.T) {
	n, url := env.SharedAPI(t)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "re")
	a := typedSet(t, c, ns, "k", client.SetRequest{Value: json.RawMessage(`{"b": 1, "a": "x"}`)})
	// The same object with its keys in another order is the same canonical value.
	b := typedSet(t, c, ns, "k", client.SetRequest{Value: json.RawMessage(`{"a": "x", "b": 1}`)})
	if a.ContentSHA256 != b.ContentSHA256 {
		t.Fatalf("same value, different hashes: %v %v", a.ContentSHA256, b.ContentSHA256)
	}
	if b.ReinforcementCount != 1 || b.Version <= a.Version {
		t.Fatalf("restatement: %+v", b)
	}
	got, err := c.Typed(t).Get(context.Background(), ns, "k", client.Identity{}, time.Time{})
	if err != nil || got.ReinforcementCount != 1 || got.VersionText != b.VersionText {
		t.Fatalf("get after restatement: %v %+v", err, got)
	}
}
