package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// An org's admin sees its own org's background work in a namespace, as the operator sees
// the deployment's: the Work view lists the namespace's deferred extraction by its queue
// id and the erasure of a user there, completed with no residue, read through the API
// (extraction status, the audit trail's erasure rows, erasure.get). A writer is not
// offered the view, and another org's admin opening the same namespace name sees none of
// this org's work.
func TestConsoleShowsAnOrgAdminItsWork(t *testing.T) {
	// A model provider that answers nothing useful: the deferred request is only queued
	// here, and whatever becomes of it later, the view lists it by its queue id.
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no model here", http.StatusServiceUnavailable)
	}))
	t.Cleanup(provider.Close)
	n, base := env.API(t, func(c *config.Config) { c.LLM.BaseURL, c.LLM.Model = provider.URL, "m" })
	org, ns := testenv.Unique(t, "org"), testenv.Unique(t, "work")
	admin := testenv.NewClient(base, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleAdmin}))
	for _, user := range []string{"alice", "bob"} {
		if r := admin.Put(t, ns, "city", map[string]any{"value": user + " lives in Trondheim", "user_id": user}); r.Status != http.StatusOK {
			t.Fatalf("write: %d %s", r.Status, r.Body)
		}
	}
	deferred, _ := json.Marshal(map[string]any{"user_id": "bob", "defer": true,
		"messages": []map[string]any{{"role": "user", "content": "I keep bees on a roof in Tromsø."}}})
	r := admin.Do(t, http.MethodPost, "/v1/namespaces/"+url.PathEscape(ns)+"/memories:fromMessages", deferred)
	if r.Status != http.StatusOK && r.Status != http.StatusAccepted {
		t.Fatalf("deferred fromMessages: %d %s", r.Status, r.Body)
	}
	queueID, _ := r.JSON(t)["queue_id"].(string)
	if queueID == "" {
		t.Fatalf("the deferred request answered no queue_id: %s", r.Body)
	}
	erasure := admin.Erase(t, map[string]any{"user_id": "alice", "namespace": ns})
	erasureID := erasure["id"].(string)
	// The view finds erasures by the audit trail's rows; wait until the trail shows this one.
	testenv.Eventually(t, 2*time.Minute, "the audit trail to name the erasure", func() bool {
		r := admin.Do(t, http.MethodGet, "/v1/namespaces/"+url.PathEscape(ns)+"/audit?limit=1000", nil)
		var ans struct {
			Rows []struct {
				Op        string `json:"op"`
				RequestID string `json:"request_id"`
			} `json:"rows"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &ans) != nil {
			return false
		}
		for _, row := range ans.Rows {
			if row.Op == "erasure.request" && row.RequestID == erasureID {
				return true
			}
		}
		return false
	})

	b := newBrowser(t, base)
	b.signIn(admin.Token)
	b.open("#/ns/" + ns)
	b.wait(`#nav a[data-nav="work"]`)
	b.open("#/ns/" + ns + "/work")
	b.wait(`#work-extraction-list tr[data-queue-id="` + queueID + `"]`)
	b.wait(`#work-erasures tr[data-erasure="` + erasureID + `"][data-status="completed"] td[data-residue="0"]`)
	b.wait(`#work-extractions-by-status dd[data-count="pending"]`)
	b.shot("15-org-admin-work")

	b.signIn(env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter}))
	b.open("#/ns/" + ns)
	b.wait("#memories")
	if b.present(`#nav a[data-nav="work"]`) {
		t.Errorf("a writer is offered the Work view")
	}

	b.signIn(env.Token(t, n, auth.NewToken{Org: testenv.Unique(t, "other"), Role: auth.RoleAdmin}))
	b.open("#/ns/" + ns + "/work")
	b.wait(`main[data-view="work"] #work-erasures`)
	if b.present(`[data-queue-id="`+queueID+`"]`) || b.present(`[data-erasure="`+erasureID+`"]`) {
		t.Errorf("another org's admin sees this org's extraction or erasure")
	}
}
