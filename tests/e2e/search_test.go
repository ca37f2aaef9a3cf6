package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/tests/testenv"
)

// filler is text with no word in common with the corpus's queries.
func filler(words int) string {
	syll := []string{"ka", "lo", "mi", "ru", "te", "zan", "pol", "dre", "vu", "sho"}
	var b strings.Builder
	for i := 0; i < words; i++ {
		fmt.Fprintf(&b, "%s%s%s ", syll[i%10], syll[(i/10)%10], syll[(i/100)%10])
	}
	return b.String()
}

// runbook is a long value whose one relevant sentence sits in its last chunk.
var runbook = filler(400) + " the pager rotation hands over to the berlin team at midnight"

// wholeCosine is the cosine of the query and a whole value under the hash embedder
// the suite runs with.
func wholeCosine(t *testing.T, query, value string) float64 {
	v, err := embed.NewHash(0).Embed(context.Background(), []string{query, value})
	if err != nil {
		t.Fatal(err)
	}
	return embed.Dot(v[0], v[1])
}

// newSearchEnv writes the corpus every search test reads. append_only keeps each row
// as written: these tests are about reading, not judging.
func newSearchEnv(t *testing.T) *phaseEnv {
	e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only"})
	rows := []struct {
		key  string
		body map[string]any
	}{
		{"billing.currency", map[string]any{"value": "all invoices are issued in euros", "tags": []string{"finance"}, "user_id": "alice"}},
		{"editor.theme", map[string]any{"value": "the user prefers dark mode in the editor", "tags": []string{"ui", "prefs"}, "user_id": "alice"}},
		{"editor.font", map[string]any{"value": "the editor font is fira code at size fourteen", "tags": []string{"ui"}, "user_id": "bob"}},
		{"deploy.window", map[string]any{"value": "deployments happen on tuesday mornings after standup", "agent": "planner", "session_id": "s1", "memory_type": "procedure"}},
		{"runbook", map[string]any{"value": runbook}},
		{"old.office", map[string]any{"value": "the office was in the harbour building downtown",
			"valid_at": time.Now().Add(-48 * time.Hour), "valid_to": time.Now().Add(-time.Hour)}},
		{"short.lived", map[string]any{"value": "the temporary wifi password for the harbour guests", "ttl_seconds": 1}},
	}
	for _, r := range rows {
		e.ok(r.key, r.body)
	}
	time.Sleep(1100 * time.Millisecond) // short.lived expires
	return e
}

// search runs memory.search with extra fields and returns the answer.
func (e *phaseEnv) search(c *testenv.Client, query string, extra map[string]any) map[string]any {
	e.t.Helper()
	body := map[string]any{"query": query, "top_k": 10}
	for k, v := range extra {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	r := c.Do(e.t, http.MethodPost, "/v1/namespaces/"+e.ns+"/memories:search", b)
	if r.Status != http.StatusOK {
		e.t.Fatalf("search %q %v: %d %s", query, extra, r.Status, r.Body)
	}
	return r.JSON(e.t)
}

func answerHits(a map[string]any) []map[string]any {
	var out []map[string]any
	for _, h := range a["hits"].([]any) {
		out = append(out, h.(map[string]any))
	}
	return out
}

func answerKeys(a map[string]any) []string {
	var keys []string
	for _, h := range answerHits(a) {
		keys = append(keys, h["memory_key"].(string))
	}
	return keys
}

func score(h map[string]any, leg string) float64 {
	return h["scores"].(map[string]any)[leg].(float64)
}

// Each leg finds what only it can: the key leg a key named by the query, the lexical
// leg a rare word, the chunk leg a sentence buried in a long value.
func TestSearchLegs(t *testing.T) {
	e := newSearchEnv(t)

	// The value shares no word with the query; only the key does.
	a := e.search(e.c, "billing currency", nil)
	if h := answerHits(a); len(h) == 0 || h[0]["memory_key"] != "billing.currency" || score(h[0], "key") <= 0 {
		t.Fatalf("key leg: %v", answerKeys(a))
	}

	a = e.search(e.c, "fira", nil)
	if h := answerHits(a); len(h) == 0 || h[0]["memory_key"] != "editor.font" || score(h[0], "lexical") <= 0 {
		t.Fatalf("lexical leg: %v", a)
	}
	for _, h := range answerHits(a)[1:] {
		if score(h, "lexical") != 0 {
			t.Fatalf("row without the word scored lexically: %v", h)
		}
	}

	// The whole runbook's vector is mostly filler; a chunk holds the sentence, so the
	// row's vector score is the chunk's, well above the whole value's cosine.
	query := "who takes the pager rotation at midnight"
	a = e.search(e.c, query, nil)
	whole := wholeCosine(t, query, runbook)
	if h := answerHits(a); len(h) == 0 || h[0]["memory_key"] != "runbook" || score(h[0], "vector") < 1.5*whole {
		t.Fatalf("chunk leg: whole-value cosine %.3f, hits %v", whole, answerKeys(a))
	}

	a = e.search(e.c, "dark mode editor", map[string]any{"mode": "rrf"})
	if a["mode"] != "rrf" || answerKeys(a)[0] != "editor.theme" {
		t.Fatalf("rrf: %v", a)
	}
	if h := answerHits(a)[0]; score(h, "fused") <= 0 || h["score"].(float64) <= 0 {
		t.Fatalf("rrf hit carries no fused score: %v", h)
	}
}

// Every filter narrows every leg, and rows whose validity or expiry passed are out.
func TestSearchFilters(t *testing.T) {
	e := newSearchEnv(t)
	q := "editor euros tuesday pager harbour office wifi fira dark"
	cases := []struct {
		name   string
		extra  map[string]any
		want   []string
		reject []string
	}{
		{"user_id", map[string]any{"user_id": "alice"}, []string{"billing.currency", "editor.theme"}, []string{"editor.font", "deploy.window"}},
		{"agent", map[string]any{"agent": "planner"}, []string{"deploy.window"}, []string{"editor.theme"}},
		{"session_id", map[string]any{"session_id": "s1"}, []string{"deploy.window"}, []string{"runbook"}},
		{"memory_type", map[string]any{"memory_type": "procedure"}, []string{"deploy.window"}, []string{"editor.font"}},
		{"tags all", map[string]any{"tags": []string{"ui", "prefs"}}, []string{"editor.theme"}, []string{"editor.font"}},
		{"tags any", map[string]any{"tags": []string{"finance", "prefs"}, "tags_mode": "any"}, []string{"billing.currency", "editor.theme"}, []string{"editor.font"}},
		{"validity and expiry", nil, []string{"editor.theme"}, []string{"old.office", "short.lived"}},
	}
	for _, c := range cases {
		got := answerKeys(e.search(e.c, q, c.extra))
		for _, k := range c.want {
			if !contains(got, k) {
				t.Errorf("%s: %s missing from %v", c.name, k, got)
			}
		}
		for _, k := range c.reject {
			if contains(got, k) {
				t.Errorf("%s: %s served in %v", c.name, k, got)
			}
		}
	}

	// as_of asks what held then: a fact stated valid from yesterday was not valid two days ago.
	e.ok("new.office", map[string]any{"value": "the office moved to the harbour tower", "valid_at": time.Now().Add(-24 * time.Hour)})
	if got := answerKeys(e.search(e.c, "harbour office tower", nil)); !contains(got, "new.office") {
		t.Errorf("valid_at yesterday, searched now: %v", got)
	}
	asOf := time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339)
	if got := answerKeys(e.search(e.c, "harbour office tower", map[string]any{"as_of": asOf})); contains(got, "new.office") || contains(got, "old.office") {
		t.Errorf("as_of two days ago served a row not valid then, or expired now: %v", got)
	}

	// A rejected row is out of search until a status filter asks for it.
	if r := e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/memories/editor.font:reject", []byte(`{"user_id": "bob"}`)); r.Status != http.StatusOK {
		t.Fatalf("reject: %d %s", r.Status, r.Body)
	}
	if got := answerKeys(e.search(e.c, "fira code font", nil)); contains(got, "editor.font") {
		t.Errorf("rejected row served: %v", got)
	}
	if got := answerKeys(e.search(e.c, "fira code font", map[string]any{"include_superseded": true})); contains(got, "editor.font") {
		t.Errorf("rejected row served with include_superseded: %v", got)
	}
}

// A search answers ok, or abstains saying whether anything was stored.
func TestSearchVerdicts(t *testing.T) {
	e := newSearchEnv(t)
	if a := e.search(e.c, "dark mode in the editor", nil); a["verdict"] != "ok" {
		t.Fatalf("relevant query: %v", a["verdict"])
	}
	a := e.search(e.c, "quantum chromodynamics lattice gauge", nil)
	if a["verdict"] != "below_threshold" && a["verdict"] != "no_match" {
		t.Fatalf("unrelated query: verdict %v", a["verdict"])
	}
	empty := &phaseEnv{t: t, c: e.c, ns: testenv.Unique(t, "empty")}
	if a := empty.search(e.c, "dark mode", nil); a["verdict"] != "no_match" || len(answerHits(a)) != 0 {
		t.Fatalf("empty namespace: %v", a)
	}
	for _, bad := range []map[string]any{{"top_k": 101}, {"mode": "max"}, {"tags_mode": "some"}, {"status": []string{"deleted"}}} {
		body := map[string]any{"query": "x"}
		for k, v := range bad {
			body[k] = v
		}
		b, _ := json.Marshal(body)
		if r := e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/memories:search", b); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("search %v: %d %s, want 422", bad, r.Status, r.Body)
		}
	}
}

// A user-bound token never sees another user's row: not through any leg, not on a
// later page, not by asking for that user.
func TestSearchReadScope(t *testing.T) {
	e := newSearchEnv(t)
	// bob's row holds every word alice's token asks for, in the value and the key.
	e.ok("editor.theme", map[string]any{"value": "the user prefers dark mode in the editor", "user_id": "bob"})
	n, api := env.API(t, nil)
	alice := testenv.NewClient(api, env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleReader, ReadUserID: "alice"}))
	for _, q := range []string{"editor theme", "fira", "dark mode in the editor", "editor font fira code"} {
		for _, extra := range []map[string]any{nil, {"user_id": "bob"}, {"mode": "rrf"}} {
			a := e.search(alice, q, extra)
			for _, h := range answerHits(a) {
				if h["user_id"] != "alice" {
					t.Fatalf("alice's token, query %q %v, served %v's %v", q, extra, h["user_id"], h["memory_key"])
				}
			}
		}
	}
	// Page through everything alice's token can see, one hit at a time.
	b, _ := json.Marshal(map[string]any{"query": "editor euros dark fira", "top_k": 1})
	seen := map[string]bool{}
	for page := 0; page < 10; page++ {
		r := alice.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/memories:search", b)
		if r.Status != http.StatusOK {
			t.Fatalf("page %d: %d %s", page, r.Status, r.Body)
		}
		a := r.JSON(t)
		for _, h := range answerHits(a) {
			if h["user_id"] != "alice" {
				t.Fatalf("page %d served %v's row", page, h["user_id"])
			}
			id := h["memory_id"].(string)
			if seen[id] {
				t.Fatalf("page %d repeated %v", page, h["memory_key"])
			}
			seen[id] = true
		}
		next, _ := a["next_page_token"].(string)
		if next == "" {
			break
		}
		b, _ = json.Marshal(map[string]any{"query": "editor euros dark fira", "top_k": 1, "page_token": next})
	}
	if len(seen) != 2 {
		t.Fatalf("alice's pages served %d rows, want her 2", len(seen))
	}
}
