package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// namespace.inventory counts the namespace's memories from the authority's heads: the
// live ones by type, status, user and tag, and the deleted ones apart; a token bound
// to one user counts that user's rows alone.
func TestInventoryCountsTheNamespacesMemories(t *testing.T) {
	ctx := context.Background()
	n, c, org := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "inventory")
	c.AppendOnly(t, ns)
	alice, bob := client.Identity{UserID: "alice"}, client.Identity{UserID: "bob"}
	for _, w := range []struct {
		key string
		id  client.Identity
		req client.SetRequest
	}{
		{"flight", alice, client.SetRequest{Value: "alice flies to Oslo on Friday", Tags: []string{"travel"}}},
		{"hotel", alice, client.SetRequest{Value: "alice booked the harbour hotel", Tags: []string{"travel"}}},
		{"diet", alice, client.SetRequest{Value: "alice eats no shellfish", MemoryType: "preference"}},
		{"desk", bob, client.SetRequest{Value: "bob sits by the window"}},
	} {
		w.req.Identity = w.id
		if _, err := tc.Set(ctx, ns, w.key, w.req); err != nil {
			t.Fatalf("set %s: %v", w.key, err)
		}
	}
	if _, err := tc.Delete(ctx, ns, "hotel", alice, ""); err != nil {
		t.Fatal(err)
	}
	inv, err := tc.Inventory(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Namespace != ns || inv.Live != 3 || inv.Deleted != 1 || inv.Expired != 0 || inv.ByUser["alice"] != 2 || inv.ByUser["bob"] != 1 ||
		inv.ByType["preference"] != 1 || inv.ByTag["travel"] != 1 || inv.ByStatus["active"] != 3 {
		t.Fatalf("the inventory: %+v", inv)
	}
	bound := testenv.NewClient(c.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: "bob"})).Typed(t)
	mine, err := bound.Inventory(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if mine.Live != 1 || mine.Deleted != 0 || fmt.Sprint(mine.ByUser) != "map[bob:1]" || mine.ByTag["travel"] != 0 {
		t.Fatalf("bob's token's inventory: %+v, want bob's row alone", mine)
	}
}
