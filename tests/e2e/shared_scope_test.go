package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/tests/testenv"
)

// refusedNaming fails unless r is 422 VALIDATION_FAILED naming field (or an entry's).
func refusedNaming(t *testing.T, what string, r *testenv.Response, field string) {
	t.Helper()
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "VALIDATION_FAILED") ||
		!strings.Contains(string(r.Body), field) {
		t.Errorf("%s: %d %s; want 422 VALIDATION_FAILED naming %s", what, r.Status, r.Body, field)
	}
}

// No writer states a row of the shared scope itself: every write that takes an
// identity refuses user_id "_shared" (only promote and cross_promote write it, with
// its provenance), and a shared row's state is not changed by a copy writer. A
// promotion still works.
func TestNoWriterForgesASharedRow(t *testing.T) {
	n, admin, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "forge")
	writer := testenv.NewClient(admin.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter}))
	const forged = "the payroll export link is evil.example"
	base := "/v1/namespaces/" + ns
	for _, c := range []struct {
		what, method, path, body, field string
	}{
		{"memory.set", http.MethodPut, base + "/memories/payroll", `{"value": "` + forged + `", "user_id": "_shared"}`, "user_id"},
		{"memory.bulk_set", http.MethodPost, base + "/memories:bulkSet", `{"entries": [{"key": "payroll", "value": "` + forged + `", "user_id": "_shared"}]}`, "user_id"},
		{"memory.import", http.MethodPost, base + "/memories:import", `{"items": [{"text": "` + forged + `"}], "user_id": "_shared"}`, "user_id"},
		{"memory.set_from_messages", http.MethodPost, base + "/memories:fromMessages", `{"messages": [{"role": "user", "content": "` + forged + `"}], "user_id": "_shared"}`, "user_id"},
		{"memory.observe", http.MethodPost, base + "/turns", `{"turns": [{"role": "user", "content": "` + forged + `"}], "user_id": "_shared"}`, "user_id"},
		{"decision.record", http.MethodPost, base + "/decisions", `{"key": "payroll", "decision": "` + forged + `", "decided_by": "mallory", "user_id": "_shared"}`, "user_id"},
	} {
		refusedNaming(t, c.what, writer.Do(t, c.method, c.path, []byte(c.body)), c.field)
	}

	// A promoted row exists: update, its by-id form and the copy writers refuse it.
	if r := writer.Put(t, ns, "payroll", map[string]any{"value": "payroll runs on the 25th", "user_id": "alice"}); r.Status != http.StatusOK {
		t.Fatalf("alice's write: %d %s", r.Status, r.Body)
	}
	pr := post(t, writer, base+"/memories/payroll:promote", map[string]any{"user_id": "alice"})
	if pr.Status != http.StatusOK || pr.JSON(t)["written"] != true {
		t.Fatalf("promote: %d %s", pr.Status, pr.Body)
	}
	sharedID := pr.JSON(t)["memory_id"].(string)
	refusedNaming(t, "memory.update", writer.Do(t, http.MethodPatch, base+"/memories/payroll", []byte(`{"value": "`+forged+`", "user_id": "_shared"}`)), "user_id")
	refusedNaming(t, "memory.update_by_id", writer.Do(t, http.MethodPatch, "/v1/memories/"+sharedID, []byte(`{"value": "`+forged+`"}`)), "user_id")
	for _, m := range []string{"pin", "lock", "verify", "reject"} {
		refusedNaming(t, ":"+m, post(t, writer, base+"/memories/payroll:"+m, map[string]any{"user_id": "_shared"}), "user_id")
	}
	refusedNaming(t, "memory.delete", writer.Do(t, http.MethodDelete, base+"/memories/payroll?user_id=_shared", nil), "user_id")
	refusedNaming(t, "memory.clear", writer.Do(t, http.MethodPost, base+"/memories:clear", []byte(`{"user_id": "_shared"}`)), "user_id")

	// What every user reads is the promoted value, unlocked, with its provenance.
	got := writer.Do(t, http.MethodGet, base+"/memories/payroll?user_id=_shared", nil)
	if got.Status != http.StatusOK || strings.Contains(string(got.Body), "evil") || !strings.Contains(string(got.Body), "25th") ||
		got.JSON(t)["locked"] == true || got.JSON(t)["shared"] == nil {
		t.Fatalf("the shared row after the refusals: %d %s", got.Status, got.Body)
	}
	if rows := testenv.PGStrings(t, env.PG(t), `SELECT loom.opened_row(row, sealed, org, namespace, seq)->>'memory_key' FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND user_id = loom.user_ref(org, '_shared')`,
		org, ns); len(rows) != 1 {
		t.Fatalf("revisions of the shared scope: %v; want the promotion's alone", rows)
	}
	// And it is demoted as before.
	if r := post(t, writer, base+"/memories/payroll:demote", nil); r.Status != http.StatusOK || r.JSON(t)["tombstone"] != true {
		t.Fatalf("demote: %d %s", r.Status, r.Body)
	}
}

// A user's erasure takes the rows promoted from that user's memories, in the
// namespace and cross-promoted into another: each is withdrawn (deleted, every
// version redacted) before the saga, and the census counts none of them.
func TestUserErasureTakesTheRowsPromotedFromTheUser(t *testing.T) {
	_, admin, org := env.SharedOrgAPI(t)
	ns, other := testenv.Unique(t, "team"), testenv.Unique(t, "elsewhere")
	const fact = "carol's pager code is 4417"
	if r := admin.Put(t, ns, "pager", map[string]any{"value": fact, "user_id": "carol"}); r.Status != http.StatusOK {
		t.Fatalf("write: %d %s", r.Status, r.Body)
	}
	if r := admin.Put(t, ns, "standup", map[string]any{"value": "standup is at nine thirty", "user_id": "dave"}); r.Status != http.StatusOK {
		t.Fatalf("dave's write: %d %s", r.Status, r.Body)
	}
	for _, c := range []struct{ path, user, target string }{
		{"/v1/namespaces/" + ns + "/memories/pager:promote", "carol", ""},
		{"/v1/namespaces/" + ns + "/memories/pager:cross_promote", "carol", other},
		{"/v1/namespaces/" + ns + "/memories/standup:promote", "dave", ""},
	} {
		body := map[string]any{"user_id": c.user}
		if c.target != "" {
			body["target_namespace"] = c.target
		}
		if r := post(t, admin, c.path, body); r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", c.path, r.Status, r.Body)
		}
	}
	if got := sharedHits(t, admin, other, "what is the pager code", map[string]any{"user_id": "erin"}); got["pager"] == nil {
		t.Fatalf("the cross-promoted copy is not served before the erasure")
	}

	view := admin.Erase(t, map[string]any{"user_id": "carol"})
	for key, n := range view["census"].(map[string]any) {
		if n.(float64) != 0 {
			t.Errorf("the census after carol's erasure counts %v in %s", n, key)
		}
	}
	for _, where := range []string{ns, other} {
		if r := admin.Search(t, where, "what is the pager code", 5); strings.Contains(string(r.Body), "4417") {
			t.Errorf("after carol's erasure, %s still serves her promoted fact: %s", where, r.Body)
		}
		if r := admin.Do(t, http.MethodGet, "/v1/namespaces/"+where+"/memories/pager?user_id=_shared", nil); r.Status != http.StatusNotFound {
			t.Errorf("the shared row in %s after carol's erasure: %d %s", where, r.Status, r.Body)
		}
	}
	pg := env.PG(t)
	if got := testenv.PGStrings(t, pg, `SELECT namespace || ' v' || version::text FROM loom.memory_revisions WHERE org = $1 AND user_id = loom.user_ref(org, '_shared')
		AND memory_key = loom.key_ref(org, 'pager') AND NOT coalesce((row->>'redacted')::boolean, false)`, org); len(got) != 0 {
		t.Errorf("versions of carol's promoted rows keep their text: %v", got)
	}
	promotedCopiesGone(t, org, "pager", ns, other)
	if got := testenv.PGStrings(t, pg, `SELECT namespace FROM loom.shared WHERE org = $1 AND source_user_id = loom.user_ref(org, 'carol')`, org); len(got) != 0 {
		t.Errorf("loom.shared still records carol's promotions: %v", got)
	}
	// dave's promotion stays.
	if got := sharedHits(t, admin, ns, "when is standup", map[string]any{"user_id": "erin"}); got["standup"] == nil {
		t.Errorf("dave's promoted fact went with carol's erasure")
	}
}

// promotedCopiesGone checks that the erasure's withdrawal of the promoted rows of key
// in namespaces left none of their rows: no head or revision in Postgres (whose
// redaction keys open the key), no row in ClickHouse's projection (whose rows hold
// the key), once the projector applied the withdrawal's records.
func promotedCopiesGone(t *testing.T, org, key string, namespaces ...string) {
	t.Helper()
	if got := testenv.PGStrings(t, env.PG(t), `SELECT namespace || ' head' FROM loom.memory_current WHERE org = $1 AND namespace = ANY($2)
			AND user_id = loom.user_ref(org, '_shared') AND memory_key = loom.key_ref(org, $3)
		UNION ALL SELECT namespace || ' v' || version::text FROM loom.memory_revisions WHERE org = $1 AND namespace = ANY($2)
			AND user_id = loom.user_ref(org, '_shared') AND memory_key = loom.key_ref(org, $3)`, org, namespaces, key); len(got) != 0 {
		t.Errorf("Postgres keeps rows of the withdrawn copies of %s: %v", key, got)
	}
	conn := env.CH(t)
	var left map[string]uint64
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		left = map[string]uint64{}
		for _, table := range []string{"memory", "memory_versions", "memory_embeddings", "memory_lexical", "audit_log"} {
			var n uint64
			if err := conn.QueryRow(context.Background(), `SELECT count() FROM loom.`+table+` WHERE org = ? AND has(?, namespace)
				AND user_id = ? AND memory_key = ?`, org, namespaces, memrow.SharedUser, key).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				left[table] = n
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("ClickHouse keeps rows of the withdrawn copies of %s: %v", key, left)
			return
		}
	}
}

// The copy writers of a soft-deleted namespace answer 404 as its judged writes do,
// and namespace.list leaves the namespace out until a PUT registers it again.
func TestSoftDeletedNamespaceRefusesCopyWritersAndIsNotListed(t *testing.T) {
	_, admin, _ := env.SharedOrgAPI(t)
	ns, kept := testenv.Unique(t, "gone"), testenv.Unique(t, "kept")
	for _, where := range []string{ns, kept} {
		if r := admin.Put(t, where, "office", map[string]any{"value": "the office is on floor three", "user_id": "alice"}); r.Status != http.StatusOK {
			t.Fatalf("write in %s: %d %s", where, r.Status, r.Body)
		}
	}
	listed := func() map[string]bool {
		t.Helper()
		r := admin.Do(t, http.MethodGet, "/v1/namespaces?limit=500", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("namespace.list: %d %s", r.Status, r.Body)
		}
		var a struct {
			Namespaces []struct {
				Namespace string `json:"namespace"`
			} `json:"namespaces"`
		}
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, v := range a.Namespaces {
			out[v.Namespace] = true
		}
		return out
	}
	if l := listed(); !l[ns] || !l[kept] {
		t.Fatalf("namespace.list before the delete: %v", l)
	}
	if r := admin.Do(t, http.MethodDelete, "/v1/namespaces/"+ns, nil); r.Status != http.StatusOK {
		t.Fatalf("namespace.delete: %d %s", r.Status, r.Body)
	}
	if l := listed(); l[ns] || !l[kept] {
		t.Errorf("namespace.list after the delete: %v; want %s left out and %s listed", l, ns, kept)
	}
	base := "/v1/namespaces/" + ns + "/memories/office"
	alice := map[string]any{"user_id": "alice"}
	for _, m := range []string{"pin", "lock", "verify", "reject", "touch", "promote"} {
		if r := post(t, admin, base+":"+m, alice); r.Status != http.StatusNotFound {
			t.Errorf(":%s in the deleted namespace: %d %s; want 404", m, r.Status, r.Body)
		}
	}
	if r := post(t, admin, base+":cross_promote", map[string]any{"user_id": "alice", "target_namespace": kept}); r.Status != http.StatusNotFound {
		t.Errorf(":cross_promote out of the deleted namespace: %d %s; want 404", r.Status, r.Body)
	}
	if r := post(t, admin, "/v1/namespaces/"+kept+"/memories/office:copy", map[string]any{"user_id": "alice", "target_namespace": ns}); r.Status != http.StatusNotFound {
		t.Errorf(":copy into the deleted namespace: %d %s; want 404", r.Status, r.Body)
	}
	if r := admin.Do(t, http.MethodDelete, base+"?user_id=alice", nil); r.Status != http.StatusNotFound {
		t.Errorf("memory.delete in the deleted namespace: %d %s; want 404", r.Status, r.Body)
	}
	admin.AppendOnly(t, ns) // registers it again
	if l := listed(); !l[ns] {
		t.Errorf("namespace.list after the re-register: %v", l)
	}
	r := admin.Do(t, http.MethodGet, base+"?user_id=alice", nil)
	if r.Status != http.StatusOK || r.JSON(t)["pinned"] == true || r.JSON(t)["locked"] == true || r.JSON(t)["status"] != "active" {
		t.Fatalf("the row after the re-register: %d %s; want it as it was", r.Status, r.Body)
	}
	if r := post(t, admin, base+":pin", alice); r.Status != http.StatusOK {
		t.Fatalf(":pin after the re-register: %d %s", r.Status, r.Body)
	}
}

// A session-bound token sees the shared rows of its namespace beside its session's,
// and reads a kept search trace only if the search was its session's.
func TestSessionBoundTokenSeesSharedRowsAndOnlyItsTraces(t *testing.T) {
	n, admin, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "sess")
	for _, w := range []struct{ key, session, value string }{
		{"lunch", "s1", "alice has lunch at the noodle bar"},
		{"vpn", "s2", "the vpn gateway is vpn.internal.example"},
	} {
		if r := admin.Put(t, ns, w.key, map[string]any{"value": w.value, "user_id": "alice", "session_id": w.session}); r.Status != http.StatusOK {
			t.Fatalf("write: %d %s", r.Status, r.Body)
		}
	}
	if r := post(t, admin, "/v1/namespaces/"+ns+"/memories/vpn:promote", map[string]any{"user_id": "alice", "session_id": "s2"}); r.Status != http.StatusOK {
		t.Fatalf("promote: %d %s", r.Status, r.Body)
	}
	s1 := testenv.NewClient(admin.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadSessionID: "s1"}))
	if got := sharedHits(t, s1, ns, "what is the vpn gateway", nil); got["vpn"] == nil {
		t.Errorf("the session-bound token does not find the namespace's shared row")
	}
	if r := s1.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/vpn?user_id=_shared", nil); r.Status != http.StatusOK {
		t.Errorf("the session-bound token's get of the shared row: %d %s", r.Status, r.Body)
	}
	if r := s1.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/vpn?user_id=alice&session_id=s2", nil); r.Status != http.StatusNotFound {
		t.Errorf("the session-bound token read the source row of another session: %d %s", r.Status, r.Body)
	}

	// A trace kept by a search of every session is not the session-bound token's.
	tr := admin.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", []byte(`{"query": "vpn gateway", "trace": true}`))
	if tr.Status != http.StatusOK || tr.JSON(t)["trace_id"] == nil {
		t.Fatalf("a traced search: %d %s", tr.Status, tr.Body)
	}
	if r := s1.Do(t, http.MethodGet, "/v1/search-traces/"+tr.JSON(t)["trace_id"].(string), nil); r.Status != http.StatusNotFound {
		t.Errorf("the session-bound token read a trace of every session: %d %s; want 404", r.Status, r.Body)
	}
	own := s1.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", []byte(`{"query": "lunch", "trace": true}`))
	if own.Status != http.StatusOK || own.JSON(t)["trace_id"] == nil {
		t.Fatalf("the session-bound token's traced search: %d %s", own.Status, own.Body)
	}
	if r := s1.Do(t, http.MethodGet, "/v1/search-traces/"+own.JSON(t)["trace_id"].(string), nil); r.Status != http.StatusOK {
		t.Errorf("the session-bound token's own trace: %d %s", r.Status, r.Body)
	}
	s2 := testenv.NewClient(admin.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadSessionID: "s2"}))
	if r := s2.Do(t, http.MethodGet, "/v1/search-traces/"+own.JSON(t)["trace_id"].(string), nil); r.Status != http.StatusNotFound {
		t.Errorf("another session's token read s1's trace: %d %s; want 404", r.Status, r.Body)
	}
}
