package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/text"
	"github.com/loomplane/loom/tests/testenv"
)

// A long value's windows fold onto its row under shared scope too (memory-architecture,
// search's pool: fold_shared_set_chunks): a passage deep in a value alice's agent
// promotes is found by bob's vector search as the promoted row's hit, scored by the
// window that holds it, not by the whole value's vector.
func TestAPromotedLongValueIsFoundByItsPassage(t *testing.T) {
	n, admin, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "chunks")
	alice := testenv.NewClient(admin.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter, ReadUserID: "alice"}))
	bob := testenv.NewClient(admin.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: "bob"}))
	long := ""
	for i := 0; len([]rune(long)) < 3*text.ChunkSize; i++ {
		long += fmt.Sprintf("paragraph %d of the runbook covers the migration of the billing database to the new cluster. ", i)
	}
	const passage = "the rollback plan for the payment gateway is to replay the ledger from the standby"
	long += passage
	if len(text.Chunks(long)) < 3 {
		t.Fatalf("the value has %d windows; the test needs a long one", len(text.Chunks(long)))
	}
	if r := alice.Put(t, ns, "runbook", map[string]any{"value": long, "agent": "ops-bot"}); r.Status != http.StatusOK {
		t.Fatalf("alice's write: %d %s", r.Status, r.Body)
	}
	if r := post(t, alice, "/v1/namespaces/"+ns+"/memories/runbook:promote", map[string]any{"agent": "ops-bot"}); r.Status != http.StatusOK {
		t.Fatalf("promote: %d %s", r.Status, r.Body)
	}

	// What the whole value's vector would score the passage: the windows must beat it.
	h := embed.NewHash(384)
	vs, err := h.Embed(context.Background(), []string{passage, long})
	if err != nil {
		t.Fatal(err)
	}
	whole := embed.Dot(vs[0], vs[1])

	b, _ := json.Marshal(map[string]any{"query": passage, "top_k": 5, "legs": []string{"vector"}})
	r := bob.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", b)
	if r.Status != http.StatusOK {
		t.Fatalf("bob's search: %d %s", r.Status, r.Body)
	}
	var got struct {
		Hits []struct {
			UserID    string             `json:"user_id"`
			MemoryKey string             `json:"memory_key"`
			Shared    map[string]any     `json:"shared"`
			Scores    map[string]float64 `json:"scores"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Hits) == 0 || got.Hits[0].MemoryKey != "runbook" || got.Hits[0].UserID != "_shared" || got.Hits[0].Shared == nil {
		t.Fatalf("bob's vector search for the passage: %s; want the promoted runbook first", r.Body)
	}
	v := got.Hits[0].Scores["vector"]
	t.Logf("the promoted row's vector score %.3f; the whole value's vector %.3f", v, whole)
	if v < whole+0.05 {
		t.Fatalf("the promoted row's vector score %.3f; the whole value's vector scores the passage %.3f, so no window folded onto it", v, whole)
	}
}
