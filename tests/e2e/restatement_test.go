package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

// memory.update over a new value keeps a fact stated for the old value only while the
// new value restates it (memory-architecture, "Revisions"; issue 33 #13): "I live in
// London" restates "I live in London, not Paris", "I live in London and work at
// Acme" says more, and the fact closes.
func TestAnUpdateKeepsAFactOnlyWhileItsValueRestatesIt(t *testing.T) {
	ctx := context.Background()
	_, c, _ := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "restate")
	c.AppendOnly(t, ns)
	alice := client.Identity{UserID: "alice"}
	if _, err := tc.Set(ctx, ns, "home", client.SetRequest{Value: "I live in London, not Paris", Identity: alice,
		Relations: []client.RelationInput{{Subject: "alice", Predicate: "lives_in", Object: "London"}}}); err != nil {
		t.Fatal(err)
	}
	relations := func(value string) int {
		t.Helper()
		if _, err := tc.Update(ctx, ns, "home", client.UpdateRequest{Value: value, Identity: alice}); err != nil {
			t.Fatal(err)
		}
		m, err := tc.Get(ctx, ns, "home", alice, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return len(m.Relations)
	}
	if n := relations("I live in London"); n != 1 {
		t.Fatalf("an update that restates the fact left %d relations; want it kept", n)
	}
	if n := relations("I live in London and work at Acme"); n != 0 {
		t.Fatalf("an update that says more left %d relations; want the fact closed", n)
	}
}
