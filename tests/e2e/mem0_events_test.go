package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// mem0's add reports what happened in mem0's words: a message Loom kept as a duplicate
// of a memory (status duplicate, hidden from search) is NONE with that memory's id, as
// mem0 reports a fact it already holds, not ADD; the kept row's id is in
// data.loom_duplicate_id.
func TestMem0AddReportsADuplicateAsNone(t *testing.T) {
	n, url := env.API(t, func(c *config.Config) { c.Command.ConflictThreshold, c.Command.DuplicateThreshold = 0.5, 0.8 })
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: testenv.Unique(t, "org")}))
	ns := testenv.Unique(t, "m0")
	type result struct {
		ID, Event, Memory string
		Data              map[string]any
		Loom              struct{ Status string }
	}
	add := func(text string) []result {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": text}},
			"user_id": "alice", "app_id": ns, "infer": false})
		r := c.Do(t, http.MethodPost, "/mem0/v3/memories/add/", body)
		var a struct{ Results []result }
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &a) != nil {
			t.Fatalf("add %q: %d %s", text, r.Status, r.Body)
		}
		return a.Results
	}
	first := add("the user prefers dark mode in the editor")
	if len(first) != 1 || first[0].Event != "ADD" || first[0].ID == "" {
		t.Fatalf("the first add: %+v", first)
	}
	dup := add("the user prefers the dark mode in the editor")
	if len(dup) != 1 || dup[0].Event != "NONE" || dup[0].ID != first[0].ID || dup[0].Data["loom_reason"] != "duplicate" {
		t.Fatalf("a near-identical add: %+v; want NONE with the first memory's id %s, reason duplicate", dup, first[0].ID)
	}
	kept, _ := dup[0].Data["loom_duplicate_id"].(string)
	if kept == "" || kept == first[0].ID {
		t.Fatalf("data.loom_duplicate_id %q; want the id of the row Loom kept", kept)
	}
	if r := c.Do(t, http.MethodGet, "/mem0/v1/memories/"+kept+"/", nil); r.Status != http.StatusOK {
		t.Fatalf("the kept row %s: %d %s", kept, r.Status, r.Body)
	}
}
