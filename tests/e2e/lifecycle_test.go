package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/loomplane/loom/tests/testenv"
)

// audit returns the audit_log ops of the namespace's revisions by seq, once the barrier
// covers them (a write's own row, a bulk write's batch, is left out: it is an audit.* event).
func (e *phaseEnv) audit() map[int64]string {
	e.t.Helper()
	e.events()
	testenv.WaitProjected(e.t, env.PG(e.t), "main", e.org, e.ns)
	conn := env.CH(e.t)
	rows, err := conn.Query(context.Background(), `SELECT seq, op FROM loom.audit_log FINAL PREWHERE org = ? AND namespace = ? WHERE event_type NOT LIKE 'audit.%'`, e.org, e.ns)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var seq uint64
		var op string
		if err := rows.Scan(&seq, &op); err != nil {
			e.t.Fatal(err)
		}
		out[int64(seq)] = op
	}
	return out
}

// history returns the key's versions from ClickHouse (behind the barrier).
func (e *phaseEnv) history(key string) []map[string]any {
	e.t.Helper()
	r := e.c.Do(e.t, http.MethodGet, "/v1/namespaces/"+e.ns+"/memories/"+key+"/history", nil)
	if r.Status != http.StatusOK {
		e.t.Fatalf("history %s: %d %s", key, r.Status, r.Body)
	}
	var out []map[string]any
	for _, v := range r.JSON(e.t)["versions"].([]any) {
		out = append(out, v.(map[string]any))
	}
	return out
}

func (e *phaseEnv) do(method, path string, body any) *testenv.Response {
	e.t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	return e.c.Do(e.t, method, "/v1/namespaces/"+e.ns+path, b)
}

func (e *phaseEnv) okDo(method, path string, body any) map[string]any {
	e.t.Helper()
	r := e.do(method, path, body)
	if r.Status != http.StatusOK {
		e.t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
	}
	return r.JSON(e.t)
}

// lastOp checks the key's last revision: its event on the topic, its audit op, its
// history entry.
func (e *phaseEnv) lastOp(key string, seq float64, event, op string) {
	e.t.Helper()
	ev := e.events()
	if int(seq) > len(ev) || ev[int(seq)-1] != event {
		e.t.Fatalf("topic event at seq %v: %v, want %s", seq, ev, event)
	}
	if got := e.audit()[int64(seq)]; got != op {
		e.t.Fatalf("audit op at seq %v: %q, want %s", seq, got, op)
	}
	h := e.history(key)
	if last := h[len(h)-1]; last["seq"].(float64) != seq || last["event"] != event {
		e.t.Fatalf("history's last version %v, want seq %v %s", last, seq, event)
	}
}

// One test per lifecycle operation: the head, the history, the event on the topic and
// the audit row.
func TestLifecycleOperations(t *testing.T) {
	t.Run("update revises in place and keeps the id", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		a := e.ok("k", map[string]any{"value": "the meeting is at ten", "tags": []string{"ops"}})
		u := e.okDo(http.MethodPatch, "/memories/k", map[string]any{"value": "the meeting is at eleven"})
		eq(t, "memory_id", u["memory_id"], a["memory_id"])
		_, h := e.head("k")
		eq(t, "value", h["value"], any("the meeting is at eleven"))
		if tags := h["tags"].([]any); len(tags) != 1 || tags[0] != "ops" {
			t.Fatalf("an update must keep the fields it does not name: %v", h["tags"])
		}
		u = e.okDo(http.MethodPatch, "/memories/k", map[string]any{"confidence": 0.4})
		_, h = e.head("k")
		eq(t, "value kept", h["value"], any("the meeting is at eleven"))
		eq(t, "confidence", h["confidence"], any(0.4))
		e.lastOp("k", u["seq"].(float64), "memory.revised", "memory.update")
		if r := e.do(http.MethodPatch, "/memories/absent", map[string]any{"value": 1}); r.Status != http.StatusNotFound {
			t.Fatalf("update of a missing key: %d %s", r.Status, r.Body)
		}
	})
	t.Run("update by id", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		a := e.ok("k", map[string]any{"value": "first"})
		b, _ := json.Marshal(map[string]any{"value": "second"})
		r := e.c.Do(t, http.MethodPatch, "/v1/memories/"+a["memory_id"].(string), b)
		if r.Status != http.StatusOK {
			t.Fatalf("update by id: %d %s", r.Status, r.Body)
		}
		e.lastOp("k", r.JSON(t)["seq"].(float64), "memory.revised", "memory.update_by_id")
		if r := e.c.Do(t, http.MethodPatch, "/v1/memories/00000000-0000-0000-0000-000000000001", b); r.Status != http.StatusNotFound {
			t.Fatalf("update of an unknown id: %d %s", r.Status, r.Body)
		}
	})
	t.Run("delete tombstones and retires the search document", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "the printer is on floor three"})
		d := e.okDo(http.MethodDelete, "/memories/k", nil)
		eq(t, "deleted", d["deleted"], any(true))
		if st, _ := e.head("k"); st != http.StatusNotFound {
			t.Fatalf("a deleted key is served: %d", st)
		}
		if keys := e.hitKeys("printer floor three"); contains(keys, "k") {
			t.Fatal("search serves a deleted key")
		}
		e.lastOp("k", d["seq"].(float64), "memory.tombstoned", "memory.delete")
	})
	t.Run("delete_version removes exactly the version read", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		v1 := e.ok("k", map[string]any{"value": "v1"})
		e.ok("k", map[string]any{"value": "v2"})
		d := e.okDo(http.MethodDelete, "/memories/k?version="+v1["version_text"].(string), nil)
		eq(t, "version_changed", d["version_changed"], any(true))
		eq(t, "deleted", d["deleted"], any(false))
		_, h := e.head("k")
		d = e.okDo(http.MethodDelete, "/memories/k?version="+h["version_text"].(string), nil)
		eq(t, "deleted", d["deleted"], any(true))
		e.lastOp("k", d["seq"].(float64), "memory.tombstoned", "memory.delete_version")
	})
	t.Run("pin, unpin, lock, unlock, verify are status changes", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "the fire exit is on the left"})
		for _, m := range []struct{ method, field string }{{"pin", "pinned"}, {"unpin", "pinned"}, {"lock", "locked"}, {"unlock", "locked"}, {"verify", "verified_by"}} {
			r := e.method("k", m.method)
			if r.Status != http.StatusOK {
				t.Fatalf("%s: %d %s", m.method, r.Status, r.Body)
			}
			e.lastOp("k", r.JSON(t)["seq"].(float64), "memory.status_changed", "memory."+m.method)
		}
		_, h := e.head("k")
		if h["pinned"] != false || h["locked"] != false {
			t.Fatalf("after unpin and unlock: %v", h)
		}
		// Pinning a pinned row writes nothing.
		e.method("k", "pin")
		r := e.method("k", "pin")
		eq(t, "a repeated pin writes", r.JSON(t)["written"], any(false))
	})
	t.Run("reject takes a row out of search; restore answers which status it restored", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "the wifi name is loom-guest"})
		r := e.method("k", "reject")
		if r.Status != http.StatusOK || r.JSON(t)["status"] != "rejected" {
			t.Fatalf("reject: %d %s", r.Status, r.Body)
		}
		if keys := e.hitKeys("wifi name guest"); contains(keys, "k") {
			t.Fatal("search serves a rejected row")
		}
		r = e.method("k", "restore")
		a := r.JSON(t)
		if r.Status != http.StatusOK || a["restored"] != "rejected" || a["restored_status"] != "active" {
			t.Fatalf("restore: %d %s", r.Status, r.Body)
		}
		e.lastOp("k", a["seq"].(float64), "memory.restored", "memory.restore")
		if keys := e.hitKeys("wifi name guest"); !contains(keys, "k") {
			t.Fatal("a restored row is not searchable")
		}
	})
	t.Run("restore undoes a delete and a supersession", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, map[string]any{"conflict_policy": "newest_wins"})
		e.ok("old", map[string]any{"value": "the user lives in Lisbon"})
		e.ok("new", map[string]any{"value": "the user lives in Berlin"})
		_, h := e.head("old")
		eq(t, "superseded", h["status"], any("superseded"))
		r := e.method("old", "restore")
		if r.Status != http.StatusOK || r.JSON(t)["restored"] != "superseded" || r.JSON(t)["restored_status"] != "active" {
			t.Fatalf("restore of a supersession: %d %s", r.Status, r.Body)
		}
		e.okDo(http.MethodDelete, "/memories/new", nil)
		r = e.method("new", "restore")
		if r.Status != http.StatusOK || r.JSON(t)["restored"] != "delete" {
			t.Fatalf("restore of a delete: %d %s", r.Status, r.Body)
		}
		_, h = e.head("new")
		eq(t, "restored value", h["value"], any("the user lives in Berlin"))
		if keys := e.hitKeys("where does the user live"); !contains(keys, "new") {
			t.Fatalf("a restored row is not searchable: %v", keys)
		}
		if r := e.method("new", "restore"); r.Status != http.StatusConflict {
			t.Fatalf("restoring a live row: %d %s", r.Status, r.Body)
		}
	})
	t.Run("clear tombstones a namespace or an identity scope, leaving locked rows", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only"})
		for i := 0; i < 5; i++ {
			e.ok(fmt.Sprintf("a%d", i), map[string]any{"value": fmt.Sprintf("alice fact %d", i), "user_id": "alice"})
			e.ok(fmt.Sprintf("b%d", i), map[string]any{"value": fmt.Sprintf("bob fact %d", i), "user_id": "bob"})
		}
		e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/memories/a0:lock", []byte(`{"user_id": "alice"}`))
		a := e.okDo(http.MethodPost, "/memories:clear", map[string]any{"user_id": "alice"})
		if a["tombstoned"].(float64) != 4 || a["skipped_locked"].(float64) != 1 {
			t.Fatalf("clear alice: %v", a)
		}
		live := testenv.Int(t, e.pool, `SELECT count(*) FROM loom.memory_current WHERE org = 'acme' AND namespace = $1 AND NOT (row->>'tombstone')::bool`, e.ns)
		eq(t, "live rows after clearing alice", live, 6)
		a = e.okDo(http.MethodPost, "/memories:clear", nil)
		eq(t, "tombstoned", a["tombstoned"], any(5.0))
		ev := e.events()
		if ev[len(ev)-1] != "memory.tombstoned" {
			t.Fatalf("events %v", ev)
		}
	})
	t.Run("get as_of answers the version at a past time", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "v1"})
		between := time.Now()
		time.Sleep(2 * time.Millisecond) // versions are wall-clock nanoseconds
		e.ok("k", map[string]any{"value": "v2"})
		r := e.do(http.MethodGet, "/memories/k?as_of="+between.UTC().Format(time.RFC3339Nano), nil)
		if r.Status != http.StatusOK || r.JSON(t)["value"] != "v1" {
			t.Fatalf("as_of between the versions: %d %s", r.Status, r.Body)
		}
		r = e.do(http.MethodGet, "/memories/k?as_of="+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), nil)
		if r.Status != http.StatusNotFound {
			t.Fatalf("as_of before the key existed: %d %s", r.Status, r.Body)
		}
	})
	t.Run("the expiry sweep applies on_expire as revisions", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, map[string]any{"types": map[string]any{
			"demoted":    map[string]any{"on_expire": "demote"},
			"anonymized": map[string]any{"on_expire": "anonymize"},
		}})
		past := time.Now().Add(-time.Minute).Format(time.RFC3339)
		e.ok("t", map[string]any{"value": "gone soon", "valid_to": past})
		e.ok("d", map[string]any{"value": "less sure soon", "memory_type": "demoted", "valid_to": past, "confidence": 0.8})
		e.ok("a", map[string]any{"value": "contact the supplier", "memory_type": "anonymized", "valid_to": past})
		a := e.okDo(http.MethodPost, "/memories:sweepExpired", nil)
		eq(t, "expired", a["expired"], any(3.0))
		if st, _ := e.head("t"); st != http.StatusNotFound {
			t.Fatal("a tombstoned expired row is served")
		}
		_, d := e.head("d")
		if d == nil || d["confidence"].(float64) != 0.4 || d["expires_at"] != nil {
			t.Fatalf("demoted row: %v", d)
		}
		_, an := e.head("a")
		if an == nil || an["value"] != "[anonymized]" {
			t.Fatalf("anonymized row: %v", an)
		}
		audit := e.audit()
		n := 0
		for _, op := range audit {
			if op == "memory.expire" {
				n++
			}
		}
		eq(t, "expire audit rows", n, 3)
		if again := e.okDo(http.MethodPost, "/memories:sweepExpired", nil); again["expired"].(float64) != 0 {
			t.Fatalf("a second sweep acted again: %v", again)
		}
	})
}

// Fixes from review: a metadata-only update is no restatement; a proposal stays a
// proposal through an update; verify is visible; a restore of a row the expiry sweep
// deleted brings it back for good; as_of does not answer a row expired at that time.
func TestLifecycleEdges(t *testing.T) {
	t.Run("a metadata-only update keeps reinforcement and status", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "the office is in Lisbon"})
		e.ok("k2", map[string]any{"value": "the office is in Lisbon"}) // a merge: nothing written
		e.ok("p", map[string]any{"value": "maybe move to Porto", "proposed": true})
		e.okDo(http.MethodPatch, "/memories/k", map[string]any{"tags": []string{"office"}})
		_, h := e.head("k")
		eq(t, "reinforcement", h["reinforcement_count"], any(0.0))
		e.okDo(http.MethodPatch, "/memories/p", map[string]any{"value": "maybe move to Braga"})
		_, h = e.head("p")
		eq(t, "an updated proposal's status", h["status"], any("proposed"))
	})
	t.Run("verify is visible on the row", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "checked by a person"})
		e.method("k", "verify")
		_, h := e.head("k")
		if by, _ := h["verified_by"].(string); by == "" || h["verified_at"] == nil {
			t.Fatalf("verified row: %v", h)
		}
	})
	t.Run("restore of an expired delete brings the row back for good", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "seasonal offer", "valid_to": time.Now().Add(-time.Minute).Format(time.RFC3339)})
		e.okDo(http.MethodPost, "/memories:sweepExpired", nil)
		r := e.method("k", "restore")
		if r.Status != http.StatusOK {
			t.Fatalf("restore: %d %s", r.Status, r.Body)
		}
		if st, _ := e.head("k"); st != http.StatusOK {
			t.Fatalf("the restored row is still hidden: %d", st)
		}
		if a := e.okDo(http.MethodPost, "/memories:sweepExpired", nil); a["expired"].(float64) != 0 {
			t.Fatal("the next sweep deleted the restored row again")
		}
	})
	t.Run("as_of does not answer a row expired at that time", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "a short-lived fact", "ttl_seconds": 1})
		r := e.do(http.MethodGet, "/memories/k?as_of="+time.Now().Add(time.Hour).UTC().Format(time.RFC3339), nil)
		if r.Status != http.StatusNotFound {
			t.Fatalf("as_of after the expiry: %d %s", r.Status, r.Body)
		}
	})
	t.Run("a write that commits nothing releases its Idempotency-Key", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("a", map[string]any{"value": "the same fact"})
		path := "/v1/namespaces/" + e.ns + "/memories/b"
		r := keyed(t, e.c, http.MethodPut, path, "merge-key", map[string]any{"value": "the same fact"})
		eq(t, "verdict", r.JSON(t)["verdict"], any("merge"))
		e.okDo(http.MethodDelete, "/memories/a", nil)
		r = keyed(t, e.c, http.MethodPut, path, "merge-key", map[string]any{"value": "the same fact"})
		if r.Status != http.StatusOK || r.JSON(t)["written"] != true {
			t.Fatalf("the retry after the peer left must be judged again and write: %d %s", r.Status, r.Body)
		}
	})
}
