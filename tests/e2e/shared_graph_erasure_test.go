package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/loomplane/loom/tests/testenv"
)

// A fact the erased user's memory states, promoted into the namespace's shared scope,
// goes with the user: the withdrawal of the copy takes the copy's part of the shared
// graph (its links, and the facts only it observed) before the user's own part goes.
// Kept, the copy's link would also keep the user's observation of the fact, since the
// user's erasure keeps what another row still holds.
func TestUserErasureTakesTheFactsOfTheCopiesItWithdraws(t *testing.T) {
	_, admin, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "graph-shared")
	admin.Configure(t, ns, map[string]any{"conflict_policy": "append_only", "relations": map[string]string{"lives_in": "single"}})
	who := fmt.Sprintf("quill%06d", time.Now().UnixNano()%1_000_000)
	if r := admin.Put(t, ns, "home", map[string]any{"value": who + " lives in Oslo", "user_id": "carol",
		"relations": []any{rel(who, "lives_in", "Oslo")}}); r.Status != http.StatusOK {
		t.Fatalf("write: %d %s", r.Status, r.Body)
	}
	if r := post(t, admin, "/v1/namespaces/"+ns+"/memories/home:promote", map[string]any{"user_id": "carol"}); r.Status != http.StatusOK {
		t.Fatalf("promote: %d %s", r.Status, r.Body)
	}
	conn := env.CH(t)
	count := func(q string) uint64 {
		t.Helper()
		var n uint64
		if err := conn.QueryRow(context.Background(), q, org, ns, who).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	const (
		links = `SELECT count() FROM loom.entity_triple_rows WHERE org = ? AND namespace = ? AND subject = ?`
		facts = `SELECT count() FROM loom.entity_triples WHERE org = ? AND namespace = ? AND subject = ?`
	)
	testenv.Eventually(t, time.Minute, "the fact's links of the memory and of its promoted copy", func() bool {
		return count(links) >= 2 && count(facts) > 0
	})

	admin.Erase(t, map[string]any{"user_id": "carol", "namespace": ns})
	testenv.Eventually(t, 2*time.Minute, "the fact and its links to go", func() bool {
		return count(links) == 0 && count(facts) == 0
	})
}
