package e2e

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/tests/testenv"
)

// rotateRefKey starts a rotation of org's user reference key as the at-rest pass will
// (docs/architecture.md): a fresh key of the next generation, the old one kept as
// retired. It waits out the second a process answers its cached key for, so the
// writes after it are named under the new key.
func rotateRefKey(t *testing.T, pool *pgxpool.Pool, org string) {
	t.Helper()
	testenv.Exec(t, pool, `UPDATE loom.user_ref_keys SET retired = key, retired_gen = gen, key = gen_random_bytes(32), gen = gen + 1
		WHERE org = $1`, org)
	time.Sleep(1500 * time.Millisecond)
}

// A record that names its user by reference says under which generation of the org's
// key (ce_loomrefgen), and a record written after the key's rotation started names the
// user under the new key and says so: a consumer matching references across records
// compares only those of one generation. On main no record carried the header (and
// a process kept the first key for its life).
func TestRotateRefKeyRecordsNameTheirGeneration(t *testing.T) {
	_, c, org := env.OrgAPI(t, nil)
	pool := env.PG(t)
	ns := testenv.Unique(t, "refgen")
	if r := c.Put(t, ns, "before", map[string]any{"value": "written under the first key", "user_id": "alice"}); r.Status != 200 {
		t.Fatalf("write before the rotation: %d %s", r.Status, r.Body)
	}
	first := testenv.UserRef(t, pool, org, "alice")
	rotateRefKey(t, pool, org)
	if r := c.Put(t, ns, "after", map[string]any{"value": "written under the second key", "user_id": "alice"}); r.Status != 200 {
		t.Fatalf("write after the rotation: %d %s", r.Status, r.Body)
	}
	second := testenv.UserRef(t, pool, org, "alice")
	if first == second {
		t.Fatal("the rotation did not change alice's reference")
	}
	testenv.Eventually(t, 30*time.Second, "both writes' records on the topic", func() bool {
		return len(env.NamespaceRecords(t, org, ns)) >= 2
	})
	want := map[int64][2]string{1: {"1", first}, 2: {"2", second}}
	for _, r := range env.NamespaceRecords(t, org, ns) {
		e, err := events.Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[e.Seq]
		if !ok || e.Revision == nil {
			continue
		}
		gen := ""
		for _, h := range r.Headers {
			if h.Key == events.HeaderRefGeneration {
				gen = string(h.Value)
			}
		}
		if gen != w[0] || e.Revision.UserRef != w[1] {
			t.Errorf("record of seq %d: %s %q, user_ref %s; want %q, %s", e.Seq, events.HeaderRefGeneration, gen, e.Revision.UserRef, w[0], w[1])
		}
	}
}
