package workers

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// memory.consolidate merges a user's near-identical memories into one summary with
// one model call: a dry run answers the cluster and calls nothing; the run writes the
// summary (tagged consolidated and src:<key>, derived from the merged rows), deletes
// the merged keys, leaves the unrelated memory and the suppression that resembles
// them live, and reports its model calls per merged row; its undo restores every
// merged row as it was and retires the summary, and a second undo is refused.
func TestConsolidateMergesAClusterAndUndoRestoresEveryMergedRow(t *testing.T) {
	const org = "consolidate"
	w := startWorkers(t, org, nil, nil)
	var mu sync.Mutex
	var prompts []string
	w.srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		if r.SchemaName != "consolidated_memory" {
			return llmtest.Status(500, "unscripted")
		}
		mu.Lock()
		prompts = append(prompts, r.Text())
		mu.Unlock()
		return llmtest.JSON(map[string]any{"key": "coffee", "summary": "Bo drinks a dark roast coffee every morning, at home"})
	})
	ns := testenv.Unique(t, "cons")
	w.c.AppendOnly(t, ns)
	facts := map[string]string{
		"coffee-1": "Bo drinks dark roast coffee every morning",
		"coffee-2": "Bo drinks dark roast coffee each morning at home",
		"coffee-3": "Every morning Bo drinks a dark roast coffee",
		"passport": "Bo's passport expires in 2031",
	}
	for key, v := range facts {
		if r := w.c.Put(t, ns, key, map[string]any{"value": v, "user_id": "bo"}); r.Status != http.StatusOK {
			t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
		}
	}
	if r := w.c.Put(t, ns, "no-coffee", map[string]any{"value": "Bo drinks no dark roast coffee every evening", "user_id": "bo",
		"tags": []string{"suppression"}}); r.Status != http.StatusOK {
		t.Fatalf("set the suppression: %d %s", r.Status, r.Body)
	}
	get := func(key string) *testenv.Response {
		return w.c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/"+key+"?user_id=bo", nil)
	}
	consolidate := func(body map[string]any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		r := w.c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:consolidate", b)
		if r.Status != http.StatusOK {
			t.Fatalf("memory.consolidate %s: %d %s", b, r.Status, r.Body)
		}
		return r.JSON(t)
	}
	members := func(cluster any) []string {
		var keys []string
		for _, m := range cluster.(map[string]any)["members"].([]any) {
			keys = append(keys, m.(map[string]any)["memory_key"].(string))
		}
		slices.Sort(keys)
		return keys
	}
	want := []string{"coffee-1", "coffee-2", "coffee-3"}

	dry := consolidate(map[string]any{"user_id": "bo", "dry_run": true, "min_similarity": 0.6})
	clusters := dry["clusters"].([]any)
	if len(clusters) != 1 || !slices.Equal(members(clusters[0]), want) || dry["model_calls"] != float64(0) || dry["run_id"] != nil {
		t.Fatalf("dry run %v; want the three coffee memories in one cluster, no model call, no run", dry)
	}
	if len(prompts) != 0 {
		t.Fatalf("a dry run called the model %d times", len(prompts))
	}

	run := consolidate(map[string]any{"user_id": "bo", "min_similarity": 0.6})
	clusters = run["clusters"].([]any)
	if len(clusters) != 1 || clusters[0].(map[string]any)["status"] != "merged" || run["merged_rows"] != float64(3) ||
		run["model_calls"] != float64(1) || run["model_calls_per_merged_row"].(float64) < 0.33 || run["model_calls_per_merged_row"].(float64) > 0.34 {
		t.Fatalf("run %v; want one cluster of three merged with one model call (1/3 a merged row)", run)
	}
	t.Logf("consolidation: %v model calls for %v merged rows (%.3f a merged row)", run["model_calls"], run["merged_rows"], run["model_calls_per_merged_row"])
	summary := clusters[0].(map[string]any)["summary"].(map[string]any)
	if summary["memory_key"] != "coffee" || len(summary["derived_from"].([]any)) != 3 {
		t.Fatalf("summary %v; want key coffee derived from the three", summary)
	}
	for _, key := range want {
		if r := get(key); r.Status != http.StatusNotFound {
			t.Fatalf("merged %s after the run: %d %s; want it deleted", key, r.Status, r.Body)
		}
	}
	s := get("coffee")
	if s.Status != http.StatusOK {
		t.Fatalf("the summary: %d %s", s.Status, s.Body)
	}
	sv := s.JSON(t)
	var tags []string
	for _, x := range sv["tags"].([]any) {
		tags = append(tags, x.(string))
	}
	if sv["value"] != "Bo drinks a dark roast coffee every morning, at home" || !slices.Contains(tags, "consolidated") || !slices.Contains(tags, "src:coffee-2") {
		t.Fatalf("the summary row %v; want the model's summary, tagged consolidated and src:<key>", sv)
	}
	for _, key := range []string{"passport", "no-coffee"} {
		if r := get(key); r.Status != http.StatusOK {
			t.Fatalf("%s after the run: %d; want it left live (unrelated, or a suppression)", key, r.Status)
		}
	}

	runID := run["run_id"].(string)
	u := w.c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/consolidations/"+runID+":undo", nil)
	if u.Status != http.StatusOK {
		t.Fatalf("undo: %d %s", u.Status, u.Body)
	}
	if undo := u.JSON(t); undo["restored"] != float64(3) || undo["retired"] != float64(1) {
		t.Fatalf("undo %v; want three rows restored and the summary retired", undo)
	}
	for _, key := range want {
		r := get(key)
		if r.Status != http.StatusOK || r.JSON(t)["value"] != facts[key] {
			t.Fatalf("%s after the undo: %d %s; want it back as it was", key, r.Status, r.Body)
		}
	}
	if r := get("coffee"); r.Status != http.StatusNotFound {
		t.Fatalf("the summary after the undo: %d; want it retired", r.Status)
	}
	if again := w.c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/consolidations/"+runID+":undo", nil); again.Status != http.StatusConflict {
		t.Fatalf("a second undo: %d %s; want 409", again.Status, again.Body)
	}
}
