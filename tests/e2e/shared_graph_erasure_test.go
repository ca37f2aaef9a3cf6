package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
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
		links    = `SELECT count() FROM loom.entity_triple_rows WHERE org = ? AND namespace = ? AND subject = ?`
		facts    = `SELECT count() FROM loom.entity_triples WHERE org = ? AND namespace = ? AND subject = ?`
		entities = `SELECT count() FROM loom.entities WHERE org = ? AND namespace = ? AND name = ?`
		shared   = `SELECT count() FROM loom.entities WHERE org = ? AND namespace = ? AND name = ? AND user_id = '_shared'`
	)
	testenv.Eventually(t, time.Minute, "the fact's links of the memory and of its promoted copy", func() bool {
		return count(links) >= 2 && count(facts) > 0 && count(shared) > 0
	})

	admin.Erase(t, map[string]any{"user_id": "carol", "namespace": ns})
	// The copy's entity rows name no memory: the names only its relation added go too.
	testenv.Eventually(t, 2*time.Minute, "the fact, its links and its entities to go", func() bool {
		return count(links) == 0 && count(facts) == 0 && count(entities) == 0
	})
	if r := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/graph/entities/"+who, nil); r.Status != http.StatusNotFound {
		t.Errorf("after the erasure, the entity %s: %d %s", who, r.Status, r.Body)
	}
}

// The withdrawal of a copy takes the shared names only the copy named: a name another
// live shared row still names stays, as its entity row is the shared user's, whoever's
// row named it last, without the spelling and type only the copy declared.
func TestAWithdrawnCopyLeavesTheSharedNamesOthersHold(t *testing.T) {
	_, admin, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "graph-shared")
	admin.Configure(t, ns, map[string]any{"conflict_policy": "append_only", "relations": map[string]string{"lives_in": "single"}})
	who := fmt.Sprintf("quill%06d", time.Now().UnixNano()%1_000_000)
	place := fmt.Sprintf("nowhere%06d", time.Now().UnixNano()%1_000_000)
	// dave's copy first, carol's last: the shared entity row of who carries carol's
	// copy's seq once its rows merge.
	for _, w := range []struct{ user, key, value string }{
		{"dave", "friend", who + " is a friend of dave"},
		{"carol", "home", who + " lives in " + place},
	} {
		body := map[string]any{"value": w.value, "user_id": w.user, "entities": []any{who}}
		if w.user == "carol" {
			// carol's spelling and type of the name are her copy's alone.
			body["entities"] = []any{map[string]any{"name": strings.ToUpper(who), "type": "person"}}
			body["relations"] = []any{rel(who, "lives_in", place)}
		}
		if r := admin.Put(t, ns, w.key, body); r.Status != http.StatusOK {
			t.Fatalf("write as %s: %d %s", w.user, r.Status, r.Body)
		}
		if r := post(t, admin, "/v1/namespaces/"+ns+"/memories/"+w.key+":promote", map[string]any{"user_id": w.user}); r.Status != http.StatusOK {
			t.Fatalf("promote %s: %d %s", w.key, r.Status, r.Body)
		}
	}
	conn := env.CH(t)
	shared := func(name string) uint64 {
		t.Helper()
		var n uint64
		if err := conn.QueryRow(context.Background(), `SELECT count() FROM loom.entities FINAL WHERE org = ? AND namespace = ? AND name = ?
			AND user_id = '_shared'`, org, ns, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testenv.Eventually(t, time.Minute, "the shared entities of both copies", func() bool {
		return shared(who) > 0 && shared(place) > 0
	})

	admin.Erase(t, map[string]any{"user_id": "carol", "namespace": ns})
	testenv.Eventually(t, 2*time.Minute, "the names only carol's copy held to go", func() bool {
		return shared(place) == 0
	})
	if n := shared(who); n == 0 {
		t.Errorf("the shared entity %s, which dave's copy still names, went with carol's copy", who)
	}
	var carols uint64
	if err := conn.QueryRow(context.Background(), `SELECT count() FROM loom.entities WHERE org = ? AND namespace = ? AND name = ?
		AND (alias = ? OR entity_type = 'person')`, org, ns, who, strings.ToUpper(who)).Scan(&carols); err != nil || carols != 0 {
		t.Errorf("%d entity rows keep the spelling and type only carol's copy declared (%v)", carols, err)
	}
	if r := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/graph/entities/"+who, nil); r.Status != http.StatusOK {
		t.Errorf("after the erasure, the entity %s dave's copy names: %d %s", who, r.Status, r.Body)
	}
	if r := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/graph/entities/"+place, nil); r.Status != http.StatusNotFound {
		t.Errorf("after the erasure, the entity %s only carol named: %d %s", place, r.Status, r.Body)
	}
}

// An erasure of a user takes the user's entity sightings (which record declared which
// spelling and type of a name) with the user's entity rows, and the census counts
// them; another user's sightings and spellings of the same name stay.
func TestAUserErasureTakesTheUsersEntitySightings(t *testing.T) {
	_, admin, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "graph-sightings")
	admin.AppendOnly(t, ns)
	for _, w := range []struct{ user, spelling, typ string }{{"alice", "Zed", "person"}, {"bob", "ZED", "friend"}} {
		body := map[string]any{"value": w.user + " knows zed", "user_id": w.user,
			"entities": []any{map[string]any{"name": w.spelling, "type": w.typ}}}
		if r := admin.Put(t, ns, w.user+"-zed", body); r.Status != http.StatusOK {
			t.Fatalf("write as %s: %d %s", w.user, r.Status, r.Body)
		}
	}
	conn := env.CH(t)
	sightings := func(user string) uint64 {
		t.Helper()
		var n uint64
		if err := conn.QueryRow(context.Background(), `SELECT count() FROM loom.entity_sightings WHERE org = ? AND namespace = ?
			AND name = 'zed' AND user_id = ?`, org, ns, user).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testenv.Eventually(t, time.Minute, "both users' sightings of zed", func() bool { return sightings("alice") > 0 && sightings("bob") > 0 })

	view := admin.Erase(t, map[string]any{"user_id": "alice", "namespace": ns})
	completed(t, view)
	if n := sightings("alice"); n != 0 {
		t.Errorf("after the erasure, %d of alice's sightings of zed are left", n)
	}
	if n := sightings("bob"); n == 0 {
		t.Errorf("the erasure of alice took bob's sightings of zed")
	}
	if _, ok := view["census"].(map[string]any)["ch:loom.entity_sightings"]; !ok {
		t.Errorf("the census does not count loom.entity_sightings: %v", view["census"])
	}
	r := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/graph/entities/zed", nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"ZED"`) || strings.Contains(string(r.Body), `"Zed"`) {
		t.Errorf("after the erasure, the entity zed: %d %s; want bob's spelling alone", r.Status, r.Body)
	}
}
