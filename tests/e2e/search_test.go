package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
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
		key string
		req client.SetRequest
	}{
		{"billing.currency", client.SetRequest{Value: "all invoices are issued in euros", Tags: []string{"finance"}, Identity: client.Identity{UserID: "alice"}}},
		{"editor.theme", client.SetRequest{Value: "the user prefers dark mode in the editor", Tags: []string{"ui", "prefs"}, Identity: client.Identity{UserID: "alice"}}},
		{"editor.font", client.SetRequest{Value: "the editor font is fira code at size fourteen", Tags: []string{"ui"}, Identity: client.Identity{UserID: "bob"}}},
		{"deploy.window", client.SetRequest{Value: "deployments happen on tuesday mornings after standup", Identity: client.Identity{Agent: "planner", SessionID: "s1"}, MemoryType: "procedure"}},
		{"runbook", client.SetRequest{Value: runbook}},
		{"old.office", client.SetRequest{Value: "the office was in the harbour building downtown",
			ValidAt: time.Now().Add(-48 * time.Hour), ValidTo: time.Now().Add(-time.Hour)}},
		{"short.lived", client.SetRequest{Value: "the temporary wifi password for the harbour guests", TTLSeconds: 1}},
	}
	for _, r := range rows {
		typedSet(t, e.c, e.ns, r.key, r.req)
	}
	time.Sleep(1100 * time.Millisecond) // short.lived expires
	return e
}

// search runs memory.search of query with the filters of f (top_k 10 unless f says)
// as c and returns the answer.
func (e *phaseEnv) search(c *testenv.Client, query string, f client.SearchRequest) *client.SearchAnswer {
	e.t.Helper()
	f.Query = query
	if f.TopK == 0 {
		f.TopK = 10
	}
	return typedSearch(e.t, c, e.ns, f)
}

func answerKeys(a *client.SearchAnswer) []string {
	var keys []string
	for _, h := range a.Hits {
		keys = append(keys, h.MemoryKey)
	}
	return keys
}

// Each leg finds what only it can: the key leg a key named by the query, the lexical
// leg a rare word, the chunk leg a sentence buried in a long value.
func TestSearchLegs(t *testing.T) {
	e := newSearchEnv(t)

	// The value shares no word with the query; only the key does.
	none := client.SearchRequest{}
	a := e.search(e.c, "billing currency", none)
	if h := a.Hits; len(h) == 0 || h[0].MemoryKey != "billing.currency" || h[0].Scores.Key <= 0 {
		t.Fatalf("key leg: %v", answerKeys(a))
	}

	a = e.search(e.c, "fira", none)
	if h := a.Hits; len(h) == 0 || h[0].MemoryKey != "editor.font" || h[0].Scores.Lexical <= 0 {
		t.Fatalf("lexical leg: %+v", a)
	}
	for _, h := range a.Hits[1:] {
		if h.Scores.Lexical != 0 {
			t.Fatalf("row without the word scored lexically: %+v", h)
		}
	}

	// The whole runbook's vector is mostly filler; a chunk holds the sentence, so the
	// row's vector score is the chunk's, well above the whole value's cosine.
	query := "who takes the pager rotation at midnight"
	a = e.search(e.c, query, none)
	whole := wholeCosine(t, query, runbook)
	if h := a.Hits; len(h) == 0 || h[0].MemoryKey != "runbook" || h[0].Scores.Vector < 1.5*whole {
		t.Fatalf("chunk leg: whole-value cosine %.3f, hits %v", whole, answerKeys(a))
	}

	a = e.search(e.c, "dark mode editor", client.SearchRequest{Mode: "rrf"})
	if a.Mode != "rrf" || answerKeys(a)[0] != "editor.theme" {
		t.Fatalf("rrf: %+v", a)
	}
	if h := a.Hits[0]; h.Scores.Fused <= 0 || h.Score <= 0 {
		t.Fatalf("rrf hit carries no fused score: %+v", h)
	}
}

// Every filter narrows every leg, and rows whose validity or expiry passed are out.
func TestSearchFilters(t *testing.T) {
	e := newSearchEnv(t)
	q := "editor euros tuesday pager harbour office wifi fira dark"
	cases := []struct {
		name   string
		extra  client.SearchRequest
		want   []string
		reject []string
	}{
		{"user_id", client.SearchRequest{UserID: "alice"}, []string{"billing.currency", "editor.theme"}, []string{"editor.font", "deploy.window"}},
		{"agent", client.SearchRequest{Agent: "planner"}, []string{"deploy.window"}, []string{"editor.theme"}},
		{"session_id", client.SearchRequest{SessionID: "s1"}, []string{"deploy.window"}, []string{"runbook"}},
		{"memory_type", client.SearchRequest{MemoryType: "procedure"}, []string{"deploy.window"}, []string{"editor.font"}},
		{"tags all", client.SearchRequest{Tags: []string{"ui", "prefs"}}, []string{"editor.theme"}, []string{"editor.font"}},
		{"tags any", client.SearchRequest{Tags: []string{"finance", "prefs"}, TagsMode: "any"}, []string{"billing.currency", "editor.theme"}, []string{"editor.font"}},
		{"validity and expiry", client.SearchRequest{}, []string{"editor.theme"}, []string{"old.office", "short.lived"}},
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
	typedSet(t, e.c, e.ns, "new.office", client.SetRequest{Value: "the office moved to the harbour tower", ValidAt: time.Now().Add(-24 * time.Hour)})
	if got := answerKeys(e.search(e.c, "harbour office tower", client.SearchRequest{})); !contains(got, "new.office") {
		t.Errorf("valid_at yesterday, searched now: %v", got)
	}
	asOf := time.Now().Add(-48 * time.Hour).UTC().Truncate(time.Second)
	if got := answerKeys(e.search(e.c, "harbour office tower", client.SearchRequest{AsOf: asOf})); contains(got, "new.office") || contains(got, "old.office") {
		t.Errorf("as_of two days ago served a row not valid then, or expired now: %v", got)
	}

	// A rejected row is out of search until a status filter asks for it.
	if _, err := e.c.Typed(t).Reject(context.Background(), e.ns, "editor.font", client.Identity{UserID: "bob"}); err != nil {
		t.Fatalf("reject: %v", err)
	}
	if got := answerKeys(e.search(e.c, "fira code font", client.SearchRequest{})); contains(got, "editor.font") {
		t.Errorf("rejected row served: %v", got)
	}
	if got := answerKeys(e.search(e.c, "fira code font", client.SearchRequest{IncludeSuperseded: true})); contains(got, "editor.font") {
		t.Errorf("rejected row served with include_superseded: %v", got)
	}
}

// A search answers ok, or abstains saying whether anything was stored.
func TestSearchVerdicts(t *testing.T) {
	e := newSearchEnv(t)
	if a := e.search(e.c, "dark mode in the editor", client.SearchRequest{}); a.Verdict != client.VerdictOK {
		t.Fatalf("relevant query: %v", a.Verdict)
	}
	a := e.search(e.c, "quantum chromodynamics lattice gauge", client.SearchRequest{})
	if a.Verdict != client.VerdictBelowThreshold && a.Verdict != client.VerdictNoMatch {
		t.Fatalf("unrelated query: verdict %v", a.Verdict)
	}
	empty := &phaseEnv{t: t, c: e.c, ns: testenv.Unique(t, "empty")}
	if a := empty.search(e.c, "dark mode", client.SearchRequest{}); a.Verdict != client.VerdictNoMatch || len(a.Hits) != 0 {
		t.Fatalf("empty namespace: %+v", a)
	}
	for _, bad := range []client.SearchRequest{{TopK: 101}, {Mode: "max"}, {TagsMode: "some"}, {Status: []string{"deleted"}}} {
		bad.Query = "x"
		_, err := e.c.Typed(t).Search(context.Background(), e.ns, bad)
		if e, ok := client.AsError(err); !ok || e.Status != http.StatusUnprocessableEntity {
			t.Fatalf("search %+v: %v, want 422", bad, err)
		}
	}
}

// A user-bound token never sees another user's row: not through any leg, not on a
// later page, not by asking for that user.
func TestSearchReadScope(t *testing.T) {
	e := newSearchEnv(t)
	// bob's row holds every word alice's token asks for, in the value and the key.
	typedSet(t, e.c, e.ns, "editor.theme", client.SetRequest{Value: "the user prefers dark mode in the editor", Identity: client.Identity{UserID: "bob"}})
	n, api := env.SharedAPI(t)
	alice := testenv.NewClient(api, env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleReader, ReadUserID: "alice"}))
	for _, q := range []string{"editor theme", "fira", "dark mode in the editor", "editor font fira code"} {
		for _, extra := range []client.SearchRequest{{}, {UserID: "bob"}, {Mode: "rrf"}} {
			a := e.search(alice, q, extra)
			for _, h := range a.Hits {
				if h.UserID != "alice" {
					t.Fatalf("alice's token, query %q %+v, served %v's %v", q, extra, h.UserID, h.MemoryKey)
				}
			}
		}
	}
	// Page through everything alice's token can see, one hit at a time.
	page := client.SearchRequest{Query: "editor euros dark fira", TopK: 1, Paging: true}
	seen := map[string]bool{}
	for n := 0; n < 10; n++ {
		a, err := alice.Typed(t).Search(context.Background(), e.ns, page)
		if err != nil {
			t.Fatalf("page %d: %v", n, err)
		}
		for _, h := range a.Hits {
			if h.UserID != "alice" {
				t.Fatalf("page %d served %v's row", n, h.UserID)
			}
			if seen[h.MemoryID] {
				t.Fatalf("page %d repeated %v", n, h.MemoryKey)
			}
			seen[h.MemoryID] = true
		}
		if a.NextPageToken == "" {
			break
		}
		page.PageToken = a.NextPageToken
	}
	if len(seen) != 2 {
		t.Fatalf("alice's pages served %d rows, want her 2", len(seen))
	}
}
