package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/tests/testenv"
)

// allowlist sends a change of the namespace's conflict allowlist.
func (e *phaseEnv) allowlist(method string, ids ...any) *testenv.Response {
	e.t.Helper()
	b, _ := json.Marshal(map[string]any{"memory_ids": ids})
	return e.c.Do(e.t, method, "/v1/namespaces/"+e.ns+"/conflict-allowlist", b)
}

// A pair a writer allowlisted is not judged again: the add clears the conflict flags
// the pair's write left on both rows (and a duplicate link), a later write of either
// row is not flagged against the other (its answer names the other allowlisted), and
// once the pair is removed the same write is a conflict again. An erasure of the
// namespace leaves no pair.
func TestAnAllowlistedPairIsNotJudgedAgain(t *testing.T) {
	e := newPhaseEnv(t, nil)
	lisbon := e.ok("k1", map[string]any{"value": "the user lives in Lisbon"})
	berlin := e.ok("k2", map[string]any{"value": "the user lives in Berlin"})
	eq(t, "verdict before the list", berlin["verdict"], any("conflict"))

	// Checked: two different memory ids of the namespace.
	if r := e.allowlist(http.MethodPost, lisbon["memory_id"], lisbon["memory_id"]); r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "VALIDATION_FAILED" {
		t.Fatalf("the same id twice: %d %s", r.Status, r.Body)
	}
	if r := e.allowlist(http.MethodPost, lisbon["memory_id"], "4f1c2a9e-0d3b-4c57-8e2a-6b9d1f3e5a70"); r.Status != http.StatusNotFound {
		t.Fatalf("an unknown memory: %d %s", r.Status, r.Body)
	}

	r := e.allowlist(http.MethodPost, berlin["memory_id"], lisbon["memory_id"])
	if r.Status != http.StatusOK {
		t.Fatalf("allowlist.add: %d %s", r.Status, r.Body)
	}
	added := r.JSON(t)
	if added["listed"] != true || added["changed"] != true {
		t.Fatalf("allowlist.add answered %v", added)
	}
	if cleared, _ := added["cleared"].([]any); len(cleared) != 2 {
		t.Fatalf("cleared %v; want both rows' flags cleared", added["cleared"])
	}
	for _, k := range []string{"k1", "k2"} {
		_, h := e.head(k)
		if h["status"] != "active" || h["conflict_with"] != nil {
			t.Fatalf("%s after the add: status %v, conflict_with %v; want active, unflagged", k, h["status"], h["conflict_with"])
		}
	}
	if r := e.allowlist(http.MethodPost, lisbon["memory_id"], berlin["memory_id"]); r.Status != http.StatusOK || r.JSON(t)["changed"] != false {
		t.Fatalf("adding a listed pair again: %d %s", r.Status, r.Body)
	}

	// A revision of k2 is not judged against k1.
	again := e.ok("k2", map[string]any{"value": "the user lives in Berlin, near the park"})
	eq(t, "verdict of a listed pair", again["verdict"], any("new"))
	if !slices.ContainsFunc(again["peers"].([]any), func(p any) bool {
		return p.(map[string]any)["memory_id"] == lisbon["memory_id"] && p.(map[string]any)["verdict"] == "allowlisted"
	}) {
		t.Fatalf("peers %v; want k1 named allowlisted", again["peers"])
	}
	_, h := e.head("k1")
	eq(t, "k1 after k2's revision", h["status"], any("active"))

	// A duplicate link goes too.
	first := e.ok("k3", map[string]any{"value": "the user prefers dark mode in the editor"})
	dup := e.ok("k4", map[string]any{"value": "the user prefers the dark mode in the editor"})
	eq(t, "verdict", dup["verdict"], any("duplicate"))
	if r := e.allowlist(http.MethodPost, first["memory_id"], dup["memory_id"]); r.Status != http.StatusOK {
		t.Fatalf("allowlist.add: %d %s", r.Status, r.Body)
	}
	_, h = e.head("k4")
	if h["status"] != "active" || h["duplicate_of"] != nil {
		t.Fatalf("the duplicate after the add: status %v, duplicate_of %v; want active, unlinked", h["status"], h["duplicate_of"])
	}

	list := e.c.Do(t, http.MethodGet, "/v1/namespaces/"+e.ns+"/conflict-allowlist", nil)
	if pairs, _ := list.JSON(t)["pairs"].([]any); list.Status != http.StatusOK || len(pairs) != 2 {
		t.Fatalf("allowlist.list: %d %s", list.Status, list.Body)
	}

	// Removed, the pair is judged again.
	if r := e.allowlist(http.MethodDelete, lisbon["memory_id"], berlin["memory_id"]); r.Status != http.StatusOK || r.JSON(t)["changed"] != true {
		t.Fatalf("allowlist.remove: %d %s", r.Status, r.Body)
	}
	judged := e.ok("k2", map[string]any{"value": "the user lives in Berlin, near the river"})
	eq(t, "verdict once removed", judged["verdict"], any("conflict"))

	// The erasure of the namespace takes the pairs, and its census counts the table.
	view := e.c.Erase(t, map[string]any{"namespace": e.ns})
	completed(t, view)
	if _, ok := view["census"].(map[string]any)[erasure.Postgres+":loom.conflict_allowlist"]; !ok {
		t.Fatalf("the census does not count loom.conflict_allowlist: %v", view["census"])
	}
	if n := testenv.Int(t, e.pool, `SELECT count(*) FROM loom.conflict_allowlist WHERE org = $1 AND namespace = $2`, e.org, e.ns); n != 0 {
		t.Fatalf("%d pairs left after the erasure", n)
	}
}

// The allowlist covers the same key held in another session of the same user: under
// newest_wins a revision of one session's row retires the other session's row of the
// key unless the pair is listed. A namespace snapshot carries the list, and a restore
// into a new namespace lists the pair again, so there too the revision retires nothing.
func TestTheAllowlistCoversTheSameKeyInAnotherSessionAndTravelsInASnapshot(t *testing.T) {
	// Written under append_only, the two sessions' rows of the key are both live.
	e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only"})
	s1 := e.ok("plan", map[string]any{"value": "deploy on monday", "user_id": "alice", "session_id": "s1"})
	s2 := e.ok("plan", map[string]any{"value": "deploy on wednesday", "user_id": "alice", "session_id": "s2"})
	if r := e.allowlist(http.MethodPost, s1["memory_id"], s2["memory_id"]); r.Status != http.StatusOK {
		t.Fatalf("allowlist.add: %d %s", r.Status, r.Body)
	}
	status := func(ns string) any {
		r := e.c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/plan?user_id=alice&session_id=s1", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("s1's row in %s: %d %s", ns, r.Status, r.Body)
		}
		return r.JSON(t)["status"]
	}
	revise := func(ns, value string) map[string]any {
		b, _ := json.Marshal(map[string]any{"value": value, "user_id": "alice", "session_id": "s2"})
		r := e.c.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/plan", b)
		if r.Status != http.StatusOK {
			t.Fatalf("s2's revision in %s: %d %s", ns, r.Status, r.Body)
		}
		return r.JSON(t)
	}

	snap := e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+":snapshot", nil)
	if snap.Status != http.StatusOK {
		t.Fatalf("snapshot: %d %s", snap.Status, snap.Body)
	}
	restored := testenv.Unique(t, "allow-restored")
	if r := e.c.DoHeaders(t, http.MethodPost, "/v1/namespaces/"+restored+":restore", snap.Body, map[string]string{"Content-Type": "application/x-ndjson"}); r.Status != http.StatusOK {
		t.Fatalf("restore: %d %s", r.Status, r.Body)
	}
	list := e.c.Do(t, http.MethodGet, "/v1/namespaces/"+restored+"/conflict-allowlist", nil)
	if pairs, _ := list.JSON(t)["pairs"].([]any); list.Status != http.StatusOK || len(pairs) != 1 {
		t.Fatalf("the restored namespace's allowlist: %d %s; want the snapshot's pair", list.Status, list.Body)
	}

	for _, ns := range []string{e.ns, restored} {
		e.c.Configure(t, ns, map[string]any{"conflict_policy": "newest_wins"})
		if a := revise(ns, "deploy on thursday"); a["superseded"] != nil && len(a["superseded"].([]any)) > 0 {
			t.Fatalf("in %s the listed pair's revision superseded %v", ns, a["superseded"])
		}
		eq(t, "s1's row after the listed pair's revision in "+ns, status(ns), any("active"))
	}
	// Unlisted, the same revision retires the other session's row.
	if r := e.allowlist(http.MethodDelete, s1["memory_id"], s2["memory_id"]); r.Status != http.StatusOK {
		t.Fatalf("allowlist.remove: %d %s", r.Status, r.Body)
	}
	revise(e.ns, "deploy on friday")
	eq(t, "s1's row once the pair is removed", status(e.ns), any("superseded"))
}
