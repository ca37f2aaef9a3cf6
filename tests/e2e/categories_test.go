package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// categoriesOf reads the namespace's categories read.
func categoriesOf(t *testing.T, c *testenv.Client, ns string) (map[string]int64, int64) {
	t.Helper()
	r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/categories", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("categories: %d %s", r.Status, r.Body)
	}
	var a struct {
		Categories []struct {
			Category string `json:"category"`
			Memories int64  `json:"memories"`
		} `json:"categories"`
		Untagged int64 `json:"untagged"`
	}
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, c := range a.Categories {
		out[c.Category] = c.Memories
	}
	return out, a.Untagged
}

// memory.assign_category links a memory to categories as a revision of its row (its
// tags), and rescinds them; the categories read counts tagged and untagged rows; a
// link that changes nothing writes nothing, and a bad request names its field.
func TestAssignCategoryLinksAndRescindsCategories(t *testing.T) {
	n, admin, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "cats")
	admin.AppendOnly(t, ns)
	for key, body := range map[string]map[string]any{
		"trip":   {"value": "alice flies to Lisbon in May", "user_id": "alice"},
		"home":   {"value": "alice's sister lives in Porto", "user_id": "alice", "tags": []string{"family"}},
		"legacy": {"value": "alice once worked in Madrid", "user_id": "alice"},
	} {
		if r := admin.Put(t, ns, key, body); r.Status != http.StatusOK {
			t.Fatalf("write %s: %d %s", key, r.Status, r.Body)
		}
	}
	if cats, untagged := categoriesOf(t, admin, ns); cats["family"] != 1 || len(cats) != 1 || untagged != 2 {
		t.Fatalf("categories before: %v, untagged %d", cats, untagged)
	}

	assign := func(body map[string]any) map[string]any {
		t.Helper()
		r := post(t, admin, "/v1/namespaces/"+ns+"/memories/trip:assign_category", body)
		if r.Status != http.StatusOK {
			t.Fatalf("assign_category %v: %d %s", body, r.Status, r.Body)
		}
		return r.JSON(t)
	}
	a := assign(map[string]any{"user_id": "alice", "categories": []string{"travel", "plans"}})
	if a["written"] != true || !sameStrings(a["categories"], "travel", "plans") || !sameStrings(a["linked"], "travel", "plans") {
		t.Fatalf("assign: %v", a)
	}
	if a := assign(map[string]any{"user_id": "alice", "categories": []string{"travel"}}); a["written"] != false || !sameStrings(a["categories"], "travel", "plans") {
		t.Fatalf("assigning a linked category again: %v", a)
	}
	if a := assign(map[string]any{"user_id": "alice", "rescind": []string{"plans"}}); a["written"] != true || !sameStrings(a["rescinded"], "plans") ||
		!sameStrings(a["categories"], "travel") {
		t.Fatalf("rescind: %v", a)
	}
	got := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/trip?user_id=alice", nil).JSON(t)
	if !sameStrings(got["tags"], "travel") || got["value"] != "alice flies to Lisbon in May" {
		t.Fatalf("memory.get after the links: %v", got)
	}
	if cats, untagged := categoriesOf(t, admin, ns); cats["family"] != 1 || cats["travel"] != 1 || len(cats) != 2 || untagged != 1 {
		t.Fatalf("categories after: %v, untagged %d", cats, untagged)
	}
	// The link is searchable as any tag is: a tag filter finds the row.
	b, _ := json.Marshal(map[string]any{"query": "where does alice fly", "top_k": 5, "user_id": "alice", "tags": []string{"travel"}})
	if r := admin.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", b); r.Status != http.StatusOK || !json.Valid(r.Body) ||
		!containsKey(r.Body, "trip") {
		t.Fatalf("search by the linked category: %d %s", r.Status, r.Body)
	}

	for _, bad := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"user_id": "alice"}, "categories"},
		{map[string]any{"user_id": "alice", "categories": []string{""}}, "categories"},
		{map[string]any{"user_id": "alice", "categories": []string{"x"}, "rescind": []string{"x"}}, "rescind"},
	} {
		r := post(t, admin, "/v1/namespaces/"+ns+"/memories/trip:assign_category", bad.body)
		if r.Status != http.StatusUnprocessableEntity || fieldOf(t, r) != bad.field {
			t.Errorf("assign_category %v: %d %s; want 422 naming %s", bad.body, r.Status, r.Body, bad.field)
		}
	}
	if r := post(t, admin, "/v1/namespaces/"+ns+"/memories/nothing:assign_category", map[string]any{"categories": []string{"x"}}); r.Status != http.StatusNotFound {
		t.Errorf("assign_category of a missing key: %d %s", r.Status, r.Body)
	}
	// A token bound to bob neither links alice's memory nor counts her categories.
	bob := testenv.NewClient(admin.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter, ReadUserID: "bob"}))
	if r := post(t, bob, "/v1/namespaces/"+ns+"/memories/trip:assign_category", map[string]any{"user_id": "alice", "categories": []string{"x"}}); r.Status != http.StatusNotFound {
		t.Errorf("bob's token linking alice's memory: %d %s", r.Status, r.Body)
	}
	if cats, untagged := categoriesOf(t, bob, ns); len(cats) != 0 || untagged != 0 {
		t.Errorf("bob's token counted alice's categories: %v, untagged %d", cats, untagged)
	}
}

func sameStrings(v any, want ...string) bool {
	list, ok := v.([]any)
	if !ok || len(list) != len(want) {
		return false
	}
	for _, w := range want {
		if !slices.Contains(list, any(w)) {
			return false
		}
	}
	return true
}

func containsKey(body []byte, key string) bool {
	var a struct {
		Hits []struct {
			MemoryKey string `json:"memory_key"`
		} `json:"hits"`
	}
	if json.Unmarshal(body, &a) != nil {
		return false
	}
	for _, h := range a.Hits {
		if h.MemoryKey == key {
			return true
		}
	}
	return false
}

func fieldOf(t *testing.T, r *testenv.Response) string {
	t.Helper()
	var e struct {
		Error struct {
			Field string `json:"field"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Error.Field
}
