package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/tests/testenv"
)

// rotateRefKey starts a rotation of org's user reference key as the at-rest pass will
// (docs/architecture.md): a fresh key of the next generation, the old one kept as
// retired. It returns once a write is named under the new key: a process reads the
// key's generation again beside a request that finds its copy a second old, so the
// first write after that second may still name rows under the old key. Its probe
// writes are of their own namespace and name no user.
func rotateRefKey(t *testing.T, c *testenv.Client, pool *pgxpool.Pool, org string) {
	t.Helper()
	testenv.Exec(t, pool, `UPDATE loom.user_ref_keys SET retired = key, retired_gen = gen, key = gen_random_bytes(32), gen = gen + 1
		WHERE org = $1`, org)
	probe := testenv.Unique(t, "refgen-probe")
	testenv.Eventually(t, 30*time.Second, "a write named under the new key", func() bool {
		if r := c.Put(t, probe, "probe", map[string]any{"value": "probe"}); r.Status != 200 {
			t.Fatalf("probe write after the rotation: %d %s", r.Status, r.Body)
		}
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_current WHERE org = $1 AND namespace = $2 AND memory_key = loom.key_ref($1, 'probe')`, org, probe) > 0
	})
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
	rotateRefKey(t, c, pool, org)
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

// While a rotation runs, the reads by clear value find the rows named under the retired
// key as well as those under the current one: memory.get of a key written before the
// rotation and of one written after it, memory.list and memory.search naming the user.
// (On the branch before migration 182, the get of the key written before answered 404:
// its head's columns hold the retired key's references.)
func TestRotateRefKeyReadsFindRowsOfBothGenerations(t *testing.T) {
	_, c, org := env.OrgAPI(t, nil)
	pool := env.PG(t)
	ns := testenv.Unique(t, "refgen")
	values := map[string]string{"before": "tea written under the first key", "after": "tea written under the second key"}
	if r := c.Put(t, ns, "before", map[string]any{"value": values["before"], "user_id": "alice"}); r.Status != 200 {
		t.Fatalf("write before the rotation: %d %s", r.Status, r.Body)
	}
	rotateRefKey(t, c, pool, org)
	if r := c.Put(t, ns, "after", map[string]any{"value": values["after"], "user_id": "alice"}); r.Status != 200 {
		t.Fatalf("write after the rotation: %d %s", r.Status, r.Body)
	}
	if n := testenv.Int(t, pool, `SELECT count(DISTINCT user_id) FROM loom.memory_current WHERE org = $1 AND namespace = $2`, org, ns); n != 2 {
		t.Fatalf("alice's heads hold %d references, want 2 (one a generation)", n)
	}
	if n := testenv.Int(t, pool, `SELECT cardinality(loom.user_refs($1, 'alice'))`, org); n != 2 {
		t.Fatalf("loom.user_refs answers %d references of alice, want 2", n)
	}
	for key, value := range values {
		r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/"+key+"?user_id=alice", nil)
		if r.Status != 200 || r.JSON(t)["value"] != value {
			t.Errorf("get of %s during the rotation: %d %s", key, r.Status, r.Body)
		}
	}
	testenv.Eventually(t, 30*time.Second, "list and search naming alice answer both keys", func() bool {
		list := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories?user_id=alice", nil)
		search := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", []byte(`{"query": "tea written under the key", "user_id": "alice", "top_k": 10}`))
		for _, r := range []*testenv.Response{list, search} {
			if r.Status != 200 || !strings.Contains(string(r.Body), values["before"]) || !strings.Contains(string(r.Body), values["after"]) {
				return false
			}
		}
		return true
	})
}

// A user's erasure while a rotation runs takes the user's rows named under either key:
// across the org (the user's namespaces are found under both), the heads, the journal
// and the user's names of both generations go, another user's rows stay, and the
// census finds no residue. (Before the registry matched p.user_refs, the rows named
// under the retired key stayed: the erasure compared the current key's reference.)
func TestRotateRefKeyErasureTakesRowsOfBothGenerations(t *testing.T) {
	_, c, org := env.OrgAPI(t, nil)
	pool := env.PG(t)
	nsBefore, nsBoth := testenv.Unique(t, "refgen-before"), testenv.Unique(t, "refgen-both")
	put := func(ns, key, user string) {
		t.Helper()
		if r := c.Put(t, ns, key, map[string]any{"value": key + " of " + user, "user_id": user}); r.Status != 200 {
			t.Fatalf("write %s/%s: %d %s", ns, key, r.Status, r.Body)
		}
	}
	put(nsBefore, "before", "alice")
	put(nsBoth, "before", "alice")
	put(nsBoth, "kept", "bob")
	rotateRefKey(t, c, pool, org)
	put(nsBoth, "after", "alice")
	refs := testenv.PGStrings(t, pool, `SELECT unnest(loom.user_refs($1, 'alice'))`, org)
	if len(refs) != 2 {
		t.Fatalf("alice has %d references during the rotation, want 2", len(refs))
	}
	count := func(table, column string) int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM `+table+` WHERE org = $1 AND `+column+` = ANY($2)`, org, refs)
	}
	if n := count("loom.memory_current", "user_id"); n != 3 {
		t.Fatalf("alice holds %d heads before the erasure, want 3", n)
	}
	view := c.Erase(t, map[string]any{"user_id": "alice"})
	for _, table := range []string{"loom.memory_current", "loom.memory_revisions", "loom.content_keys"} {
		if n := count(table, "user_id"); n != 0 {
			t.Errorf("%s holds %d rows of alice after her erasure (%v)", table, n, view)
		}
	}
	if n := count("loom.user_names", "user_ref"); n != 0 {
		t.Errorf("loom.user_names holds %d names of alice after her erasure", n)
	}
	for _, ns := range []string{nsBefore, nsBoth} {
		for _, key := range []string{"before", "after"} {
			if r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/"+key+"?user_id=alice", nil); r.Status != http.StatusNotFound {
				t.Errorf("get of alice's %s/%s after her erasure: %d %s", ns, key, r.Status, r.Body)
			}
		}
	}
	if r := c.Do(t, http.MethodGet, "/v1/namespaces/"+nsBoth+"/memories/kept?user_id=bob", nil); r.Status != 200 {
		t.Errorf("get of bob's row after alice's erasure: %d %s", r.Status, r.Body)
	}
}

// A new user's first write in the moment after a swap, while the process still names
// rows under the key it cached (now the retired one), is taken and read back: on main
// loom.named_user_ref compared the bound reference with the current key's alone and the
// write answered 500.
func TestANewUsersFirstWriteRightAfterASwapIsTaken(t *testing.T) {
	_, c, org := env.OrgAPI(t, nil)
	pool := env.PG(t)
	ns := testenv.Unique(t, "refgen-new")
	if r := c.Put(t, ns, "before", map[string]any{"value": "written under the first key", "user_id": "alice"}); r.Status != 200 {
		t.Fatalf("write before the swap: %d %s", r.Status, r.Body)
	}
	testenv.Exec(t, pool, `UPDATE loom.user_ref_keys SET retired = key, retired_gen = gen, key = gen_random_bytes(32), gen = gen + 1
		WHERE org = $1`, org)
	if r := c.Put(t, ns, "first", map[string]any{"value": "a newcomer's first memory", "user_id": "newcomer"}); r.Status != 200 {
		t.Fatalf("a new user's first write right after the swap: %d %s", r.Status, r.Body)
	}
	if r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/first?user_id=newcomer", nil); r.Status != 200 ||
		!strings.Contains(string(r.Body), "a newcomer's first memory") {
		t.Fatalf("the newcomer's memory read back: %d %s", r.Status, r.Body)
	}
}
