package e2e

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

// memory.import writes each text under a key that digests it, oldest first, through
// memory.bulk_set's verdicts: a text another memory holds merges into it, a repeated
// text is written once, a dry run writes nothing, and a re-run changes nothing.
func TestImportWritesOnceOldestFirst(t *testing.T) {
	e := newExtractionEnv(t, nil)
	ctx := context.Background()
	e.set("user.drink", map[string]any{"value": "Prefers coffee", "user_id": "alice"})
	e.projected()
	day := func(d int) *time.Time { at := time.Date(2024, 1, d, 0, 0, 0, 0, time.UTC); return &at }
	req := client.ImportRequest{Identity: client.Identity{UserID: "alice"}, Items: []client.ImportItem{
		{Text: "Has a dog called Rex", ValidAt: day(2)},
		{Text: "Lives in Rome", ValidAt: day(1)},
		{Text: "Has a dog called Rex"},
		{Text: "Prefers coffee"},
	}}
	revisions := func() int64 {
		return testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_revisions WHERE namespace = $1`, e.ns)
	}
	dry := req
	dry.DryRun = true
	if a, err := e.tc.Import(ctx, e.ns, dry); err != nil || !a.DryRun || a.Counts["written"] != 2 || revisions() != 1 {
		t.Fatalf("dry run: %+v, %v; %d revisions, want 1", a, err, revisions())
	}
	a, err := e.tc.Import(ctx, e.ns, req)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, it := range a.Items {
		got = append(got, it.Outcome)
		if !regexp.MustCompile(`^import:[0-9a-f]{24}$`).MatchString(it.Key) {
			t.Errorf("item %d's key %q", it.Index, it.Key)
		}
	}
	if want := []string{"written", "written", "repeated", "merged"}; !slices.Equal(got, want) || a.Items[0].Key != a.Items[2].Key {
		t.Fatalf("outcomes %v, want %v: %+v", got, want, a.Items)
	}
	seq := func(key string) int64 {
		return testenv.Int(t, env.PG(t), `SELECT max(seq) FROM loom.memory_revisions WHERE namespace = $1 AND memory_key = loom.key_ref(org, $2)`, e.ns, key)
	}
	if older, newer := seq(a.Items[1].Key), seq(a.Items[0].Key); older >= newer {
		t.Fatalf("the older item's seq %d is not before the newer's %d", older, newer)
	}
	if m, err := e.tc.Get(ctx, e.ns, a.Items[1].Key, client.Identity{UserID: "alice"}, time.Time{}); err != nil || string(m.Value) != `"Lives in Rome"` {
		t.Fatalf("the imported memory: %+v, %v", m, err)
	}
	before := revisions()
	again, err := e.tc.Import(ctx, e.ns, req)
	if err != nil || again.Counts["unchanged"] != 2 || again.Counts["written"] != 0 || revisions() != before {
		t.Fatalf("a re-run: %+v, %v; %d revisions, want %d", again, err, revisions(), before)
	}
}
