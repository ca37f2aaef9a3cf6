package faults

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// With Postgres down, everything of the knowledge plane that reads or checks the heads
// fails closed with the retryable 503 POSTGRES_UNAVAILABLE: a search never answers a
// page it could not check, and a write commits nothing. Once Postgres is back, the
// same calls answer again.
func TestKnowledgeFailsClosedWithPostgresDown(t *testing.T) {
	c := client(t, nil)
	stop, _ := env.Relay(t, relay.Faults{})
	defer stop()
	ns := testenv.Unique(t, "kpgdown")
	base := "/v1/namespaces/" + ns + "/knowledge"
	body := func(v any) []byte { b, _ := json.Marshal(v); return b }
	if r := c.Do(t, http.MethodPost, base, body(map[string]any{"source_uri": "guide.txt", "content": "The okapi lives in the Ituri forest."})); r.Status != http.StatusOK {
		t.Fatalf("knowledge.add: %d %s", r.Status, r.Body)
	}
	search := func() *testenv.Response {
		return c.Do(t, http.MethodPost, base+":search", body(map[string]any{"query": "okapi forest"}))
	}
	if r := search(); r.Status != http.StatusOK || len(r.JSON(t)["hits"].([]any)) != 1 {
		t.Fatalf("knowledge.search before the outage: %d %s", r.Status, r.Body)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			env.Stack.Postgres.Restart(context.Background())
		}
	})
	if err := env.Stack.Postgres.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		method, path string
		body         []byte
	}{
		{http.MethodPost, base + ":search", body(map[string]any{"query": "okapi forest"})},
		{http.MethodGet, base + "/outline?source_uri=guide.txt", nil},
		{http.MethodGet, base + "/document?source_uri=guide.txt", nil},
		{http.MethodGet, base, nil},
		{http.MethodPost, base, body(map[string]any{"source_uri": "new.txt", "content": "written in the outage"})},
		{http.MethodDelete, base + "/document?source_uri=guide.txt", nil},
		// The dataset ops and inspect read the heads and the catalog too.
		{http.MethodGet, base + "/datasets?source_uri=guide.txt", nil},
		{http.MethodPost, base + "/datasets:approve", body(map[string]any{"source_uri": "guide.txt", "dataset_id": "table-1", "version": 1})},
		{http.MethodPost, base + "/datasets:query", body(map[string]any{"source_uri": "guide.txt", "dataset_id": "table-1", "query": map[string]any{}})},
		{http.MethodGet, base + "/inspect", nil},
	} {
		if r := c.Do(t, call.method, call.path, call.body); !r.Retryable503(t, "POSTGRES_UNAVAILABLE") {
			t.Fatalf("%s %s with Postgres down: %d %s", call.method, call.path, r.Status, r.Body)
		}
	}
	if err := env.Stack.Postgres.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	restarted = true
	testenv.Eventually(t, 60*time.Second, "knowledge.search to answer after the restart", func() bool {
		r := search()
		return r.Status == http.StatusOK && len(r.JSON(t)["hits"].([]any)) == 1
	})
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.knowledge_heads WHERE org = $1 AND namespace = $2`, org, ns); n != 1 {
		t.Fatalf("%d heads after the outage: the refused write committed", n)
	}
}
