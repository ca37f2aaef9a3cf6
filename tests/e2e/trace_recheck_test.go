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
	_, c, _ := env.SharedOrgAPI(t)
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

// memory.search_trace hides what search hides: a reflection (memrow.HiddenTypes),
// which search serves only to a search asking for memory_type reflection, is named by
// no trace of a search that did not ask, kept while it was a reflection or read back
// after a memory was revised into one; the trace of a search that asked names it.
func TestSearchTraceHidesAReflectionAsSearchDoes(t *testing.T) {
	ctx := context.Background()
	_, c, _ := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "tracehide")
	c.AppendOnly(t, ns)
	put := func(key, value, memoryType string) {
		t.Helper()
		if r := c.Put(t, ns, key, map[string]any{"value": value, "user_id": "alice", "memory_type": memoryType}); r.Status != http.StatusOK {
			t.Fatalf("write %s: %d %s", key, r.Status, r.Body)
		}
	}
	put("drink", "alice drinks green tea every morning", "fact")
	put("lesson", "alice drinks green tea every morning: offer her tea first", "reflection")
	trace := func(memoryType string) (*client.SearchAnswer, string) {
		t.Helper()
		a, err := tc.Search(ctx, ns, client.SearchRequest{Query: "what does alice drink every morning", UserID: "alice",
			MemoryType: memoryType, Trace: true, TopK: 5})
		if err != nil || a.TraceID == "" {
			t.Fatalf("search (memory_type %q): %+v %v", memoryType, a, err)
		}
		return a, a.TraceID
	}
	unasked, unaskedID := trace("")
	if keys := answerKeys(unasked); len(keys) != 1 || keys[0] != "drink" {
		t.Fatalf("an unfiltered search served %v; want drink alone", keys)
	}
	asked, askedID := trace("reflection")
	if keys := answerKeys(asked); len(keys) != 1 || keys[0] != "lesson" {
		t.Fatalf("a search for reflections served %v; want lesson alone", keys)
	}
	read := func(id string) *client.SearchTrace {
		t.Helper()
		tr, err := tc.SearchTrace(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	if tr := read(unaskedID); strings.Contains(string(tr.Trace), `"memory_key":"lesson"`) || !strings.Contains(string(tr.Trace), `"memory_key":"drink"`) {
		t.Fatalf("the unfiltered search's trace: %s; want drink and no reflection", tr.Trace)
	}

	// drink is revised into a reflection: the unfiltered search's trace no longer names
	// it anywhere (legs, fusion, served, validation drops), and counts it.
	put("drink", "alice drinks green tea every morning, so have tea ready", "reflection")
	if tr := read(unaskedID); strings.Contains(string(tr.Trace), `"memory_key":"drink"`) || tr.StaleDropped != 1 {
		t.Fatalf("the unfiltered search's trace after drink became a reflection: stale_dropped %d, %s; want drink left out and counted",
			tr.StaleDropped, tr.Trace)
	}
	if tr := read(askedID); !strings.Contains(string(tr.Trace), `"memory_key":"lesson"`) || tr.StaleDropped != 0 {
		t.Fatalf("the trace of the search for reflections: stale_dropped %d, %s; want lesson kept", tr.StaleDropped, tr.Trace)
	}
}
