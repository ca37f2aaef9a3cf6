package e2e

import (
	"net/http"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// The recalls a process's searches gathered in the second before it stops are written
// as it stops: they were flushed by a timer that fired after the pool had closed, and
// were lost with a warning.
func TestAStoppingProcessWritesTheRecallsItGathered(t *testing.T) {
	n, url, stop := env.Serve(t, []string{"api"}, nil)
	org := testenv.Unique(t, "org")
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	ns := testenv.Unique(t, "stoprecalls")
	c.Set(t, ns, "lunch", "the team lunch is on fridays at noon")
	r := c.Search(t, ns, "when is the team lunch", 1)
	if r.Status != http.StatusOK {
		t.Fatalf("search: %d %s", r.Status, r.Body)
	}
	if hits, _ := r.JSON(t)["hits"].([]any); len(hits) != 1 {
		t.Fatalf("search answered %s; want the lunch memory", r.Body)
	}
	stop()
	n.Close()
	pool := env.PG(t)
	if got := testenv.Int(t, pool, `SELECT coalesce(sum(recalls), 0) FROM loom.memory_touches WHERE org = $1 AND namespace = $2`, org, ns); got != 1 {
		t.Fatalf("after the stop the memory's recalls read %d; want the search's 1", got)
	}
}
