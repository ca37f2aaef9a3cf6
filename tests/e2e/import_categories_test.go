package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/tests/testenv"
)

// memory.import's tags are category links (memory-architecture, "memory.import"): the
// import records the pairs never stored, and a link the owner rescinded stays
// rescinded when an import writes its key again; the import's batch audit row counts
// both.
func TestImportLeavesARescindedCategoryLinkRescinded(t *testing.T) {
	ctx := context.Background()
	_, c, org := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "import-cats")
	c.AppendOnly(t, ns)
	pool := env.PG(t)
	alice := client.Identity{UserID: "alice"}
	const text = "alice flies to Lisbon in May"
	item := client.ImportItem{Text: text, Tags: []string{"travel", "plans"}}
	first, err := tc.Import(ctx, ns, client.ImportRequest{Items: []client.ImportItem{item}, Identity: alice})
	if err != nil || first.Items[0].Outcome != "written" {
		t.Fatalf("the first import: %+v %v", first, err)
	}
	key := first.Items[0].Key
	links := func() string {
		t.Helper()
		return fmt.Sprint(testenv.PGStrings(t, pool, `SELECT category || ':' || CASE WHEN rescinded_at IS NULL THEN 'linked' ELSE 'rescinded' END
			FROM loom.category_links WHERE org = $1 AND namespace = $2 AND memory_key = loom.key_ref($1, $3) ORDER BY category`, org, ns, key))
	}
	if got := links(); got != "[plans:linked travel:linked]" {
		t.Fatalf("the import's links: %s; want plans and travel linked", got)
	}

	// The owner rescinds plans; then the key holds other text, so the import writes it
	// again.
	if a, err := tc.AssignCategory(ctx, ns, key, client.AssignCategoryRequest{Identity: alice, Rescind: []string{"plans"}}); err != nil ||
		!a.Written {
		t.Fatalf("rescind plans: %+v %v", a, err)
	}
	if _, err := tc.Set(ctx, ns, key, client.SetRequest{Value: "alice flies to Porto in June", Identity: alice}); err != nil {
		t.Fatal(err)
	}
	again, err := tc.Import(ctx, ns, client.ImportRequest{Items: []client.ImportItem{item}, Identity: alice})
	if err != nil || again.Items[0].Outcome != "revised" {
		t.Fatalf("the second import: %+v %v", again, err)
	}
	m, err := tc.Get(ctx, ns, key, alice, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var value string
	if err := m.Decode(&value); err != nil || value != text || !slices.Equal(m.Tags, []string{"travel"}) {
		t.Fatalf("the key after the second import: %s tagged %v; want its text tagged travel alone (plans was rescinded)", m.Value, m.Tags)
	}
	if got := links(); got != "[plans:rescinded travel:linked]" {
		t.Fatalf("the links after the second import: %s; want plans still rescinded", got)
	}

	// Each import's batch audit row counts what it did with the links.
	testenv.WaitProjected(t, pool, "main", org, ns)
	var counts []string
	if err := auditchain.EachRow(ctx, env.CH(t), auditchain.Namespace{Org: org, Namespace: ns}, 0, 0, func(r auditchain.Row) error {
		if r.Op == "memory.import.batch" {
			var d struct {
				Verdicts map[string]int `json:"verdicts"`
			}
			if err := json.Unmarshal([]byte(r.Detail), &d); err != nil {
				return err
			}
			counts = append(counts, fmt.Sprintf("linked=%d rescinded=%d", d.Verdicts["categories_linked"], d.Verdicts["categories_left_rescinded"]))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(counts) != "[linked=2 rescinded=0 linked=0 rescinded=1]" {
		t.Fatalf("the imports' batch rows count %v; want 2 pairs linked, then 1 left rescinded", counts)
	}
}
