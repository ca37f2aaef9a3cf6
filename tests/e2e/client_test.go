package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// The typed client against a real node: every kind of answer decodes strictly (no
// field the server sends is unknown to it), errors are *client.Error with their codes,
// and an Idempotency-Key retry is answered as a replay.
func TestTypedClient(t *testing.T) {
	n, url := env.SharedAPI(t)
	ctx := context.Background()
	c, err := client.New(url, env.Token(t, n, auth.NewToken{Org: "acme"}), client.WithStrictDecoding())
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Unique(t, "client")
	alice := client.Identity{UserID: "alice"}

	if _, err := c.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatal(err)
	}
	if a, err := c.AddBlacklistPattern(ctx, ns, `(?i)project\s+falcon`); err != nil || len(a.Blacklist) != 1 {
		t.Fatalf("blacklist add: %v %+v", err, a)
	}
	set, err := c.Set(ctx, ns, "dir/a:b", client.SetRequest{Value: "the user prefers tea", Identity: alice, Tags: []string{"drink"},
		Entities: []client.Entity{{Name: "tea", Type: "drink"}}}, client.IdempotencyKey("k-"+ns))
	if err != nil || !set.Written || set.Event != "memory.written" || set.Version == 0 {
		t.Fatalf("set: %v %+v", err, set)
	}
	again, err := c.Set(ctx, ns, "dir/a:b", client.SetRequest{Value: "the user prefers tea", Identity: alice, Tags: []string{"drink"},
		Entities: []client.Entity{{Name: "tea", Type: "drink"}}}, client.IdempotencyKey("k-"+ns))
	if err != nil || !again.Replayed || again.Version != set.Version {
		t.Errorf("the same call under the same key: %v replayed=%v version %d, want a replay of %d", err, again.Replayed, again.Version, set.Version)
	}
	m, err := c.Get(ctx, ns, "dir/a:b", alice, time.Time{})
	if err != nil || m.MemoryID != set.MemoryID || string(m.Value) != `"the user prefers tea"` || m.Entities[0] != "tea" {
		t.Fatalf("get: %v %+v", err, m)
	}
	if byID, err := c.GetByID(ctx, set.MemoryID); err != nil || byID.MemoryKey != "dir/a:b" {
		t.Errorf("get by id: %v %+v", err, byID)
	}
	up, err := c.Update(ctx, ns, "dir/a:b", client.UpdateRequest{Value: "the user prefers green tea", Identity: alice})
	if err != nil || up.Event != "memory.revised" {
		t.Fatalf("update: %v %+v", err, up)
	}
	if _, err := c.Pin(ctx, ns, "dir/a:b", alice); err != nil {
		t.Fatal(err)
	}
	_, err = c.Set(ctx, ns, "dir/a:b", client.SetRequest{Value: "coffee", Identity: alice})
	if e, ok := client.AsError(err); !ok || e.Code != client.CodePinnedConflict || e.Status != 409 || e.Retryable {
		t.Errorf("changing a pinned value: %v, want 409 PINNED_CONFLICT", err)
	}
	_, err = c.Set(ctx, ns, "k2", client.SetRequest{Value: "about Project Falcon"})
	if e, ok := client.AsError(err); !ok || e.Code != client.CodeBlacklisted || e.Field != "value" {
		t.Errorf("a blacklisted value: %v", err)
	}

	found, err := c.Search(ctx, ns, client.SearchRequest{Query: "which tea does the user prefer", UserID: "alice"})
	if err != nil || found.Verdict != client.VerdictOK || found.Hits[0].MemoryKey != "dir/a:b" || found.Barrier.Generations[ns] == 0 {
		t.Fatalf("search: %v %+v", err, found)
	}
	list, err := c.List(ctx, ns, client.ListOptions{Order: "key"})
	if err != nil || len(list.Memories) != 1 {
		t.Errorf("list: %v %+v", err, list)
	}
	keys, err := c.Keys(ctx, ns, client.KeysOptions{Prefix: "dir/"})
	if err != nil || len(keys.Keys) != 1 || keys.Keys[0].Rows != 1 {
		t.Errorf("keys: %v %+v", err, keys)
	}
	hist, err := c.History(ctx, ns, "dir/a:b", alice)
	if err != nil || len(hist.Versions) != 3 || hist.Versions[2].Event != "memory.status_changed" {
		t.Errorf("history: %v %+v", err, hist)
	}
	if e, err := c.Entity(ctx, ns, "tea", client.EntityOptions{}); err != nil || e.Name != "tea" {
		t.Errorf("entity: %v %+v", err, e)
	}

	bulk, err := c.BulkSet(ctx, ns, client.BulkSetRequest{Entries: []client.BulkEntry{{Key: "a", Value: 1}, {Key: "b", Value: map[string]any{"x": true}}}})
	if err != nil || len(bulk.Written) != 2 {
		t.Fatalf("bulk: %v %+v", err, bulk)
	}
	moved, err := c.Delete(ctx, ns, "a", client.Identity{}, "1")
	if err != nil || !moved.VersionChanged || moved.Deleted {
		t.Errorf("delete_version of a version the key moved on from: %v %+v", err, moved)
	}
	del, err := c.Delete(ctx, ns, "a", client.Identity{}, "")
	if err != nil || !del.Deleted || !del.Tombstone {
		t.Errorf("delete: %v %+v", err, del)
	}
	if _, err := c.Get(ctx, ns, "a", client.Identity{}, time.Time{}); !client.IsCode(err, client.CodeNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if r, err := c.Restore(ctx, ns, "a", client.Identity{}); err != nil || r.Restored != "delete" {
		t.Errorf("restore: %v %+v", err, r)
	}
	if cl, err := c.Clear(ctx, ns, client.ClearRequest{UserID: "-"}); err != nil || cl.Tombstoned != 2 {
		t.Errorf("clear of the default user: %v %+v", err, cl)
	}
	if sw, err := c.SweepExpired(ctx, ns); err != nil || sw.Expired != 0 {
		t.Errorf("sweep: %v %+v", err, sw)
	}

	// Health's details are the operator's: an org's token reads the status alone.
	if h, err := c.Health(ctx, "postgres", "lag"); err != nil || h.Status != "ok" || h.Postgres != nil || h.Lag != nil || h.DeploymentID != "" {
		t.Errorf("health to an org's token: %v %+v", err, h)
	}
	op, err := client.New(url, env.Token(t, n, auth.NewToken{Role: auth.RoleOperator}), client.WithStrictDecoding())
	if err != nil {
		t.Fatal(err)
	}
	if h, err := op.Health(ctx, "postgres", "lag"); err != nil || h.Status != "ok" || h.Postgres == nil || h.Lag == nil || h.DeploymentID == "" {
		t.Errorf("health to the operator: %v %+v", err, h)
	}
	if r, err := c.Ready(ctx); err != nil || !r.Ready {
		t.Errorf("ready: %v %+v", err, r)
	}
	if ns2, err := c.Namespace(ctx, ns); err != nil || ns2.Config.ConflictPolicy != "append_only" {
		t.Errorf("namespace: %v %+v", err, ns2)
	}
}
