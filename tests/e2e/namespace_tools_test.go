package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

// A soft-deleted namespace is neither read nor written: its reads, searches and writes
// answer 404 and namespace.inventory refuses it; a PUT registers it again and all of it
// comes back as it was.
func TestSoftDeletedNamespaceIsNotReadAndComesBackOnReRegister(t *testing.T) {
	_, admin, _ := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "soft")
	admin.AppendOnly(t, ns)
	if r := admin.Put(t, ns, "office", map[string]any{"value": "the office moved to the harbour district", "user_id": "alice", "tags": []string{"facilities"}}); r.Status != http.StatusOK {
		t.Fatalf("write: %d %s", r.Status, r.Body)
	}
	if r := admin.Do(t, http.MethodDelete, "/v1/namespaces/"+ns, nil); r.Status != http.StatusOK || r.JSON(t)["was_live"] != true {
		t.Fatalf("namespace.delete: %d %s", r.Status, r.Body)
	}
	for what, r := range map[string]*testenv.Response{
		"search":    admin.Search(t, ns, "where is the office", 5),
		"get":       admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/office?user_id=alice", nil),
		"list":      admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories", nil),
		"history":   admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/office/history?user_id=alice", nil),
		"inventory": admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/inventory", nil),
		"write":     admin.Put(t, ns, "desk", map[string]any{"value": "desks are hot-desked", "user_id": "alice"}),
	} {
		if r.Status != http.StatusNotFound || strings.Contains(string(r.Body), "harbour") {
			t.Errorf("%s of the deleted namespace: %d %s; want 404", what, r.Status, r.Body)
		}
	}
	if r := admin.Do(t, http.MethodDelete, "/v1/namespaces/"+ns, nil); r.Status != http.StatusOK || r.JSON(t)["was_live"] != false {
		t.Fatalf("namespace.delete again: %d %s", r.Status, r.Body)
	}
	admin.AppendOnly(t, ns) // PUT registers it again
	r := admin.Search(t, ns, "where is the office", 5)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "harbour") {
		t.Fatalf("search after the re-register: %d %s", r.Status, r.Body)
	}
	if r := admin.Put(t, ns, "desk", map[string]any{"value": "desks are hot-desked", "user_id": "bob"}); r.Status != http.StatusOK {
		t.Fatalf("write after the re-register: %d %s", r.Status, r.Body)
	}
	inv := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/inventory", nil)
	if inv.Status != http.StatusOK {
		t.Fatalf("inventory: %d %s", inv.Status, inv.Body)
	}
	var a struct {
		Live     int64            `json:"live"`
		ByUser   map[string]int64 `json:"by_user"`
		ByType   map[string]int64 `json:"by_type"`
		ByStatus map[string]int64 `json:"by_status"`
		ByTag    map[string]int64 `json:"by_tag"`
	}
	if err := json.Unmarshal(inv.Body, &a); err != nil {
		t.Fatal(err)
	}
	if a.Live != 2 || a.ByUser["alice"] != 1 || a.ByUser["bob"] != 1 || a.ByStatus["active"] != 2 || a.ByTag["facilities"] != 1 || len(a.ByType) == 0 {
		t.Fatalf("inventory: %s", inv.Body)
	}
}

// memory.inspect shows one memory's internal state: its head, its versions, its links
// and where its search document is.
func TestInspectShowsHeadVersionsLinksAndSearchDocument(t *testing.T) {
	_, admin, _ := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "inspect")
	admin.AppendOnly(t, ns)
	for _, v := range []string{"the build server is in rack four", "the build server is in rack five"} {
		if r := admin.Put(t, ns, "build_server", map[string]any{"value": v, "user_id": "alice"}); r.Status != http.StatusOK {
			t.Fatalf("write: %d %s", r.Status, r.Body)
		}
	}
	if r := post(t, admin, "/v1/namespaces/"+ns+"/memories/build_server:promote", map[string]any{"user_id": "alice"}); r.Status != http.StatusOK {
		t.Fatalf("promote: %d %s", r.Status, r.Body)
	}
	admin.Search(t, ns, "where is the build server", 3) // waits at the barrier: the projections hold the writes
	r := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/build_server/inspect?user_id=alice", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("inspect: %d %s", r.Status, r.Body)
	}
	var a struct {
		Head     map[string]any   `json:"head"`
		Versions []map[string]any `json:"versions"`
		Embed    *struct {
			Present bool `json:"present"`
			Current bool `json:"current"`
		} `json:"embeddings"`
		Index *struct {
			Applied bool `json:"head_applied"`
		} `json:"index"`
	}
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Versions) != 2 || !strings.Contains(a.Head["value"].(string), "rack five") || a.Embed == nil || !a.Embed.Present || !a.Embed.Current ||
		a.Index == nil || !a.Index.Applied {
		t.Fatalf("inspect: %s", r.Body)
	}
	shared := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/build_server/inspect?user_id=_shared", nil)
	if shared.Status != http.StatusOK || !strings.Contains(string(shared.Body), `"source_user_id":"alice"`) {
		t.Fatalf("inspect of the promoted row: %d %s", shared.Status, shared.Body)
	}
}
