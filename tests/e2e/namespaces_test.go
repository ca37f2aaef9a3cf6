package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// allNamespaces follows namespace.list's pages to the end, pageSize at a time.
func allNamespaces(t *testing.T, c *client.Client, pageSize int) (names []string, counts map[string]client.NamespaceSummary, pages int) {
	t.Helper()
	counts = map[string]client.NamespaceSummary{}
	token := ""
	for {
		a, err := c.ListNamespaces(context.Background(), client.NamespacesOptions{Limit: pageSize, PageToken: token})
		if err != nil {
			t.Fatalf("namespace.list page %d: %v", pages+1, err)
		}
		if len(a.Namespaces) > pageSize {
			t.Fatalf("a page of %d holds %d namespaces", pageSize, len(a.Namespaces))
		}
		pages++
		for _, n := range a.Namespaces {
			names = append(names, n.Namespace)
			counts[n.Namespace] = n
		}
		if a.NextPageToken == "" {
			return names, counts, pages
		}
		token = a.NextPageToken
	}
}

// namespace.list: a token lists its own org's namespaces alone (written ones and one
// only configured), by name, page by page; a token limited to namespaces lists those;
// the counts are the live memories, a delete counted at once; a user-bound token
// counts its user's rows.
func TestNamespaceListShowsTheTokensOrgOnly(t *testing.T) {
	n, url := env.SharedAPI(t)
	org, other := testenv.Unique(t, "org"), testenv.Unique(t, "other")
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	outsider := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: other}))
	// Names that sort apart from their writing order.
	mine := []string{"delta", "alpha", "echo", "charlie", "bravo"}
	facts := []string{"the sky over the harbour is blue", "cats purr loudly at night", "trains run late on sundays",
		"pasta needs well salted water", "mountains hold snow in april"}
	for i, ns := range mine {
		for k := 0; k <= i; k++ {
			if r := admin.Put(t, ns, "k"+string(rune('a'+k)), map[string]any{"value": facts[k], "user_id": "alice"}); r.Status != http.StatusOK {
				t.Fatalf("write %s: %d %s", ns, r.Status, r.Body)
			}
		}
	}
	admin.Put(t, "alpha", "bob-note", map[string]any{"value": "bob collects stamps", "user_id": "bob"})
	admin.Configure(t, "foxtrot", map[string]any{"conflict_policy": "newest_wins", "visibility": "public"}) // configured, never written
	outsider.Put(t, "zulu", "secret", map[string]any{"value": "another org's"})
	outsider.Put(t, "alpha", "secret", map[string]any{"value": "another org's"})

	want := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"}
	typed := admin.Typed(t)
	names, got, pages := allNamespaces(t, typed, 2)
	if !slices.Equal(names, want) {
		t.Fatalf("the org's namespaces in pages of 2: %v; want %v", names, want)
	}
	if pages != 3 {
		t.Errorf("6 namespaces in pages of 2 took %d pages; want 3", pages)
	}
	wantCounts := map[string]int{"alpha": 3, "bravo": 5, "charlie": 4, "delta": 1, "echo": 3, "foxtrot": 0}
	for ns, c := range wantCounts {
		if got[ns].Memories != c {
			t.Errorf("%s counts %d memories; want %d", ns, got[ns].Memories, c)
		}
	}
	if p := got["foxtrot"].Policy; p == nil || p.ConflictPolicy != "newest_wins" || p.Visibility != "public" {
		t.Errorf("foxtrot's policy reads %+v; want newest_wins, public", p)
	}
	if got["alpha"].Policy != nil {
		t.Errorf("alpha, never configured, lists a policy: %+v", got["alpha"].Policy)
	}
	if whole, _, _ := allNamespaces(t, typed, 500); !slices.Equal(whole, want) {
		t.Errorf("in one page: %v; want %v", whole, want)
	}

	// A delete is counted as soon as it answered.
	if r := admin.Do(t, http.MethodDelete, "/v1/namespaces/bravo/memories/ka?user_id=alice", nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if _, after, _ := allNamespaces(t, typed, 50); after["bravo"].Memories != 4 {
		t.Errorf("after a delete bravo counts %d memories; want 4", after["bravo"].Memories)
	}

	// The other org sees its own two, alpha counting its one row.
	theirs, theirCounts, _ := allNamespaces(t, outsider.Typed(t), 50)
	if !slices.Equal(theirs, []string{"alpha", "zulu"}) || theirCounts["alpha"].Memories != 1 {
		t.Errorf("the other org lists %v %+v; want alpha (1 memory) and zulu", theirs, theirCounts)
	}

	// A token limited to namespaces lists those of them the org has.
	limited := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, Namespaces: []string{"charlie", "alpha", "nowhere"}}))
	if names, _, _ := allNamespaces(t, limited.Typed(t), 1); !slices.Equal(names, []string{"alpha", "charlie"}) {
		t.Errorf("a token limited to charlie, alpha and nowhere lists %v; want alpha and charlie", names)
	}

	// A token bound to bob lists only the namespaces holding bob's rows, and counts
	// them alone: the other namespaces' names are not his to learn.
	bob := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: "bob"}))
	for _, limit := range []int{1, 50} {
		names, bobs, _ := allNamespaces(t, bob.Typed(t), limit)
		if !slices.Equal(names, []string{"alpha"}) || bobs["alpha"].Memories != 1 {
			t.Errorf("a token bound to bob lists %v %+v in pages of %d; want alpha alone, with his 1 memory", names, bobs, limit)
		}
	}

	// A page token of another order, and a limit out of bounds, are refused.
	for _, q := range []string{"limit=0", "limit=501", "page_token=nonsense"} {
		if r := admin.Do(t, http.MethodGet, "/v1/namespaces?"+q, nil); r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "VALIDATION_FAILED" {
			t.Errorf("GET /v1/namespaces?%s: %d %s; want 422", q, r.Status, r.Body)
		}
	}
}
