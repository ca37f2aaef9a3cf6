package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

type validateReport struct {
	Valid    bool           `json:"valid"`
	Counts   map[string]int `json:"counts"`
	Findings []struct {
		Code      string `json:"code"`
		Severity  string `json:"severity"`
		Field     string `json:"field"`
		MemoryKey string `json:"memory_key"`
		UserID    string `json:"user_id"`
	} `json:"findings"`
	Checked struct {
		Heads int `json:"heads"`
	} `json:"checked"`
	Coverage struct {
		Complete bool `json:"complete"`
	} `json:"coverage"`
}

func validateOf(t *testing.T, c *testenv.Client, ns string) validateReport {
	t.Helper()
	r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/validate", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("validate: %d %s", r.Status, r.Body)
	}
	var v validateReport
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// namespace.validate finds nothing in a namespace whose rows meet its policy, and after
// the policy tightens (a lower char limit, a retype, a threshold above the duplicate
// threshold) names the rows a write would now refuse, changing nothing.
func TestNamespaceValidateReportsWhatThePolicyNowRefuses(t *testing.T) {
	_, admin, _ := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "validate")
	admin.AppendOnly(t, ns)
	for key, body := range map[string]map[string]any{
		"long":  {"value": "the quarterly planning offsite is in the mountain lodge", "user_id": "alice", "memory_type": "note"},
		"short": {"value": "tea", "user_id": "bob", "memory_type": "note"},
		"fact":  {"value": "the office opens at eight", "user_id": "alice"},
	} {
		if r := admin.Put(t, ns, key, body); r.Status != http.StatusOK {
			t.Fatalf("write %s: %d %s", key, r.Status, r.Body)
		}
	}
	if v := validateOf(t, admin, ns); !v.Valid || len(v.Findings) != 0 || v.Checked.Heads != 3 || !v.Coverage.Complete {
		t.Fatalf("validate of a clean namespace: %+v", v)
	}
	admin.Configure(t, ns, map[string]any{"conflict_policy": "append_only", "conflict_threshold": 0.99,
		"types": map[string]any{"note": map[string]any{"char_limit": 10}, "fact": map[string]any{"retype": "claim"}}})
	v := validateOf(t, admin, ns)
	if v.Counts["OVER_CHAR_LIMIT"] != 1 || v.Counts["RETYPE_PENDING"] != 1 || v.Counts["THRESHOLD_ABOVE_DUPLICATE"] != 1 || len(v.Counts) != 3 {
		t.Fatalf("validate after the policy tightened: %+v", v)
	}
	seen := map[string]string{}
	for _, f := range v.Findings {
		seen[f.Code] = f.MemoryKey + f.Field
	}
	if seen["OVER_CHAR_LIMIT"] != "long" || seen["RETYPE_PENDING"] != "fact" || seen["THRESHOLD_ABOVE_DUPLICATE"] != "conflict_threshold" {
		t.Fatalf("findings: %+v", v.Findings)
	}
	// The report wrote nothing: the long note is still there, as it was.
	if got := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/long?user_id=alice", nil); got.Status != http.StatusOK {
		t.Fatalf("the long note after validate: %d %s", got.Status, got.Body)
	}
	if r := admin.Do(t, http.MethodGet, "/v1/namespaces/"+testenv.Unique(t, "never")+"/validate", nil); r.Status != http.StatusNotFound {
		t.Errorf("validate of a namespace never written: %d %s", r.Status, r.Body)
	}
}

type tuneReport struct {
	Types []struct {
		MemoryType    string   `json:"memory_type"`
		Pairs         int      `json:"pairs"`
		P99           float64  `json:"p99"`
		Current       float64  `json:"current"`
		CurrentSource string   `json:"current_source"`
		Suggested     *float64 `json:"suggested"`
		Reason        string   `json:"reason"`
	} `json:"types"`
	Patch   map[string]any `json:"patch"`
	Skipped []string       `json:"skipped"`
}

func tuneOf(t *testing.T, c *testenv.Client, ns string) tuneReport {
	t.Helper()
	r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/tune", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("tune: %d %s", r.Status, r.Body)
	}
	var a tuneReport
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// namespace.tune suggests a type's conflict gate from the namespace's own vectors, above
// where unrelated rows lie; a type with too few rows gets none; and once the patch it
// answers is applied, the type's gate comes from it and the report leaves it.
func TestNamespaceTuneSuggestsTheGateFromTheNamespacesVectors(t *testing.T) {
	_, admin, _ := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "tune")
	admin.AppendOnly(t, ns)
	facts := []string{"the office opens at eight", "alice prefers green tea", "the build server is in rack four",
		"bob's birthday is in March", "the staging database moved to eu-west-2", "the quarterly offsite is in the mountains",
		"carol leads the payments team", "the wifi password rotates monthly", "lunch is served at noon on fridays",
		"the printer on floor two is broken"}
	for i, f := range facts {
		if r := admin.Put(t, ns, fmt.Sprintf("f%d", i), map[string]any{"value": f, "user_id": "alice"}); r.Status != http.StatusOK {
			t.Fatalf("write: %d %s", r.Status, r.Body)
		}
	}
	if r := admin.Put(t, ns, "lonely", map[string]any{"value": "a single note", "user_id": "alice", "memory_type": "note"}); r.Status != http.StatusOK {
		t.Fatalf("write: %d %s", r.Status, r.Body)
	}
	a := tuneOf(t, admin, ns)
	if len(a.Skipped) != 0 || len(a.Types) != 2 {
		t.Fatalf("tune: %+v", a)
	}
	fact, note := a.Types[0], a.Types[1]
	if fact.MemoryType != "fact" || fact.Pairs != 45 || fact.Suggested == nil || *fact.Suggested < fact.P99 || *fact.Suggested < 0.5 ||
		fact.CurrentSource != "LOOM_CONFLICT_THRESHOLD" {
		t.Fatalf("the fact type's calibration: %+v", fact)
	}
	if note.MemoryType != "note" || note.Suggested != nil || note.Reason != "too_few_pairs" {
		t.Fatalf("the note type's calibration: %+v", note)
	}
	if fact.Reason == "within_margin" {
		return // the embedder's background puts the gate where it is: nothing to apply
	}
	patch, _ := json.Marshal(a.Patch)
	var cfg map[string]any
	_ = json.Unmarshal(patch, &cfg)
	if cfg["types"].(map[string]any)["fact"].(map[string]any)["dedup_threshold"] != *fact.Suggested {
		t.Fatalf("patch %s does not apply the suggestion %v", patch, *fact.Suggested)
	}
	cfg["conflict_policy"] = "append_only"
	admin.Configure(t, ns, cfg)
	b := tuneOf(t, admin, ns)
	if b.Types[0].CurrentSource != "types.fact.dedup_threshold" || b.Types[0].Current != *fact.Suggested || b.Types[0].Reason != "within_margin" ||
		len(b.Patch) != 0 {
		t.Fatalf("tune after the patch: %+v", b)
	}
}
