package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

// memory.search_trace reads a kept trace as the authority stands now (issue 33,
// contradiction 9): a memory deleted after the search leaves the trace's legs, fused
// pool and served hits, and stale_dropped counts it.
func TestSearchTraceLeavesOutWhatIsNoLongerServed(t *testing.T) {
	ctx := context.Background()
	_, c, _ := env.OrgAPI(t, nil)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "tracestale")
	c.AppendOnly(t, ns)
	for key, v := range map[string]string{"lisbon": "alice flies to Lisbon in May", "porto": "alice takes the train to Porto in June"} {
		if r := c.Put(t, ns, key, map[string]any{"value": v, "user_id": "alice"}); r.Status != http.StatusOK {
			t.Fatalf("write %s: %d %s", key, r.Status, r.Body)
		}
	}
	found, err := tc.Search(ctx, ns, client.SearchRequest{Query: "where does alice travel", UserID: "alice", Trace: true, TopK: 5})
	if err != nil || found.TraceID == "" || len(found.Hits) != 2 {
		t.Fatalf("search: %+v %v", found, err)
	}
	fresh, err := tc.SearchTrace(ctx, found.TraceID)
	if err != nil || fresh.StaleDropped != 0 || !strings.Contains(string(fresh.Trace), `"lisbon"`) {
		t.Fatalf("the trace before the delete: %d %s %v", fresh.StaleDropped, fresh.Trace, err)
	}
	if r := c.Do(t, http.MethodDelete, "/v1/namespaces/"+ns+"/memories/lisbon?user_id=alice", nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	tr, err := tc.SearchTrace(ctx, found.TraceID)
	if err != nil {
		t.Fatal(err)
	}
	var trace struct {
		Served []struct {
			ID struct {
				MemoryKey string `json:"memory_key"`
			} `json:"id"`
		} `json:"served"`
	}
	if err := json.Unmarshal(tr.Trace, &trace); err != nil {
		t.Fatal(err)
	}
	if tr.StaleDropped != 1 || strings.Contains(string(tr.Trace), `"lisbon"`) || len(trace.Served) != 1 || trace.Served[0].ID.MemoryKey != "porto" {
		t.Fatalf("the trace after the delete: stale_dropped %d, %s", tr.StaleDropped, tr.Trace)
	}
}
