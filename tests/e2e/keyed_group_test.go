package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// A keyed write joins its namespace's group commit. One whose key a retry took over
// while it waited for the group is left out of it: it answers 503
// IDEMPOTENT_TAKEN_OVER and writes nothing, and the writes grouped with it commit.
// The test holds the namespace's generation row, so the writes queue behind a lead
// commit that waits for it, and re-tokens the key's row as a retry's take-over does.
func TestATakenOverKeyedWriteIsLeftOutOfItsGroup(t *testing.T) {
	ctx := context.Background()
	n, url := env.API(t, nil)
	org := testenv.Unique(t, "org")
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	ns := testenv.Unique(t, "group")
	path := func(key string) string { return "/v1/namespaces/" + ns + "/memories/" + key }
	if r := c.Put(t, ns, "seed", map[string]any{"value": "the namespace's first write"}); r.Status != http.StatusOK {
		t.Fatalf("seed: %d %s", r.Status, r.Body)
	}
	pool := env.PG(t)
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	if _, err := hold.Exec(ctx, `SELECT 1 FROM loom.scope_generations WHERE org = $1 AND scope = $2 FOR UPDATE`, org, ns); err != nil {
		t.Fatal(err)
	}
	answers := map[string]chan *testenv.Response{"lead": make(chan *testenv.Response, 1), "keyed": make(chan *testenv.Response, 1),
		"beside": make(chan *testenv.Response, 1)}
	go func() {
		answers["lead"] <- c.Put(t, ns, "lead", map[string]any{"value": "the group's lead, waiting for the row"})
	}()
	time.Sleep(300 * time.Millisecond) // the lead's commit waits for the row
	go func() {
		answers["keyed"] <- keyed(t, c, http.MethodPut, path("taken"), "group-key", map[string]any{"value": "taken over"})
	}()
	go func() { answers["beside"] <- c.Put(t, ns, "beside", map[string]any{"value": "grouped beside it"}) }()
	deadline := time.Now().Add(3 * time.Second)
	for testenv.Int(t, pool, `SELECT count(*) FROM loom.idempotency WHERE org = $1`, org) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the keyed write never claimed its key")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // both queue behind the lead
	if _, err := pool.Exec(ctx, `UPDATE loom.idempotency SET token = token + 1 WHERE org = $1`, org); err != nil {
		t.Fatal(err)
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lead", "beside"} {
		if r := <-answers[name]; r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	if r := <-answers["keyed"]; r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "IDEMPOTENT_TAKEN_OVER" {
		t.Fatalf("the taken-over keyed write: %d %s", r.Status, r.Body)
	}
	if r := c.Do(t, http.MethodGet, path("taken"), nil); r.Status != http.StatusNotFound {
		t.Fatalf("the taken-over write's key reads %d %s, want 404: it wrote nothing", r.Status, r.Body)
	}
	if r := c.Do(t, http.MethodGet, path("beside"), nil); r.Status != http.StatusOK {
		t.Fatalf("the write grouped beside it reads %d %s", r.Status, r.Body)
	}
}
