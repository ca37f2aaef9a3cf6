package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// sharedHits are the hits of a search that carry a promoted row's provenance, by key.
func sharedHits(t *testing.T, c *testenv.Client, ns, query string, extra map[string]any) map[string]map[string]any {
	t.Helper()
	body := map[string]any{"query": query, "top_k": 10}
	for k, v := range extra {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	r := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", b)
	if r.Status != http.StatusOK {
		t.Fatalf("search %s: %d %s", ns, r.Status, r.Body)
	}
	out := map[string]map[string]any{}
	for _, h := range r.JSON(t)["hits"].([]any) {
		hit := h.(map[string]any)
		if pv, ok := hit["shared"].(map[string]any); ok {
			if hit["user_id"] != "_shared" {
				t.Fatalf("a hit with provenance is not the shared row: %v", hit)
			}
			out[hit["memory_key"].(string)] = pv
		}
	}
	return out
}

func post(t *testing.T, c *testenv.Client, path string, body map[string]any) *testenv.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	return c.Do(t, http.MethodPost, path, b)
}

// A fact alice's agent promotes is found by bob's search of the namespace, bob's own
// token included, with where it came from; demoted, it is gone from every search.
func TestPromotedFactIsFoundByAnotherUserUntilDemoted(t *testing.T) {
	n, admin, org := env.SharedOrgAPI(t)
	url := admin.URL
	ns := testenv.Unique(t, "team")
	alice := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter, ReadUserID: "alice"}))
	bob := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: "bob"}))
	const fact = "the staging database moved to eu-west-2"
	set := alice.Put(t, ns, "staging_db", map[string]any{"value": fact, "agent": "ops-bot"})
	if set.Status != http.StatusOK {
		t.Fatalf("alice's write: %d %s", set.Status, set.Body)
	}
	src := set.JSON(t)
	if got := sharedHits(t, bob, ns, "where is the staging database", nil); len(got) != 0 {
		t.Fatalf("bob found a shared row before any promotion: %v", got)
	}
	if r := bob.Search(t, ns, "where is the staging database", 5); strings.Contains(string(r.Body), "eu-west-2") {
		t.Fatalf("bob read alice's row before its promotion: %s", r.Body)
	}

	// bob may not promote alice's row; alice promotes her own.
	if r := post(t, testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter, ReadUserID: "bob"})),
		"/v1/namespaces/"+ns+"/memories/staging_db:promote", map[string]any{"agent": "ops-bot", "user_id": "alice"}); r.Status != http.StatusNotFound {
		t.Fatalf("bob promoting alice's row: %d %s; want 404", r.Status, r.Body)
	}
	pr := post(t, alice, "/v1/namespaces/"+ns+"/memories/staging_db:promote", map[string]any{"agent": "ops-bot"})
	if pr.Status != http.StatusOK || pr.JSON(t)["written"] != true {
		t.Fatalf("promote: %d %s", pr.Status, pr.Body)
	}

	for who, c := range map[string]*testenv.Client{"bob's token": bob, "the unbound admin filtering on bob": admin} {
		extra := map[string]any{}
		if c == admin {
			extra["user_id"] = "bob"
		}
		pv := sharedHits(t, c, ns, "where is the staging database", extra)["staging_db"]
		if pv == nil {
			t.Fatalf("%s does not find the promoted fact", who)
		}
		if pv["source_user_id"] != "alice" || pv["source_agent"] != "ops-bot" || pv["source_key"] != "staging_db" ||
			pv["source_namespace"] != ns || pv["source_memory_id"] != src["memory_id"] || pv["source_version"] != src["version"] ||
			!strings.HasPrefix(pv["promoted_by"].(string), "token:") || pv["op"] != "memory.promote" {
			t.Fatalf("%s: the provenance %v does not name alice's row %v", who, pv, src)
		}
	}
	// The promotion is a revision: it is in the journal, sealed, and on the topic's
	// projection (the shared row's history).
	pg := env.PG(t)
	if got := testenv.PGStrings(t, pg, `SELECT (sealed IS NOT NULL)::text FROM loom.memory_revisions
		WHERE org = $1 AND namespace = $2 AND user_id = loom.user_ref(org, '_shared') AND memory_key = (SELECT loom.key_ref($1, 'staging_db'))`, org, ns); len(got) != 1 || got[0] != "true" {
		t.Fatalf("the promoted revision in the journal (sealed?): %v", got)
	}
	if got := testenv.PGStrings(t, pg, `SELECT loom.user_name(org, source_user_id) FROM loom.shared WHERE org = $1 AND namespace = $2 AND memory_key = loom.key_ref(org, 'staging_db') AND demoted_at IS NULL`,
		org, ns); len(got) != 1 || got[0] != "alice" {
		t.Fatalf("loom.shared's record of the promotion: %v", got)
	}

	// bob's token cannot demote what alice promoted; alice can.
	if r := post(t, bob, "/v1/namespaces/"+ns+"/memories/staging_db:demote", nil); r.Status != http.StatusForbidden {
		t.Fatalf("bob's reader token demoting: %d %s; want 403", r.Status, r.Body)
	}
	if r := post(t, alice, "/v1/namespaces/"+ns+"/memories/staging_db:demote", nil); r.Status != http.StatusOK || r.JSON(t)["tombstone"] != true {
		t.Fatalf("demote: %d %s", r.Status, r.Body)
	}
	if got := sharedHits(t, bob, ns, "where is the staging database", nil); len(got) != 0 {
		t.Fatalf("bob still finds the demoted fact: %v", got)
	}
	if r := bob.Search(t, ns, "where is the staging database", 5); strings.Contains(string(r.Body), "eu-west-2") {
		t.Fatalf("bob reads the fact after its demotion: %s", r.Body)
	}
	// alice's own row is as it was.
	if r := alice.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/staging_db?agent=ops-bot", nil); r.Status != http.StatusOK {
		t.Fatalf("alice's row after the demotion: %d %s", r.Status, r.Body)
	}
}

// A shared row promoted into another namespace and back carries its first writer; an
// erasure of the first namespace takes its promoted rows and the copies made of them
// in the other namespace.
func TestCrossPromotionAndBackAndTheNamespaceErasureTakesTheCopies(t *testing.T) {
	_, admin, _ := env.SharedOrgAPI(t)
	ns, other := testenv.Unique(t, "src"), testenv.Unique(t, "dst")
	const fact = "deploys freeze every friday at noon"
	if r := admin.Put(t, ns, "freeze", map[string]any{"value": fact, "user_id": "alice"}); r.Status != http.StatusOK {
		t.Fatalf("write: %d %s", r.Status, r.Body)
	}
	if r := post(t, admin, "/v1/namespaces/"+ns+"/memories/freeze:promote", map[string]any{"user_id": "alice"}); r.Status != http.StatusOK {
		t.Fatalf("promote: %d %s", r.Status, r.Body)
	}
	if r := post(t, admin, "/v1/namespaces/"+ns+"/memories/freeze:cross_promote", map[string]any{"user_id": "alice"}); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("cross_promote without a target: %d %s; want 422", r.Status, r.Body)
	}
	cp := post(t, admin, "/v1/namespaces/"+ns+"/memories/freeze:cross_promote", map[string]any{"user_id": "_shared", "target_namespace": other})
	if cp.Status != http.StatusOK {
		t.Fatalf("cross_promote: %d %s", cp.Status, cp.Body)
	}
	pv := sharedHits(t, admin, other, "when do deploys freeze", map[string]any{"user_id": "carol"})["freeze"]
	if pv == nil || pv["source_namespace"] != ns || pv["source_user_id"] != "alice" || pv["op"] != "memory.cross_promote" {
		t.Fatalf("the copy in %s: %v", other, pv)
	}
	// And back: the other namespace's shared row promoted into the first one.
	if r := post(t, admin, "/v1/namespaces/"+ns+"/memories/freeze:demote", nil); r.Status != http.StatusOK {
		t.Fatalf("demote in %s: %d %s", ns, r.Status, r.Body)
	}
	back := post(t, admin, "/v1/namespaces/"+other+"/memories/freeze:cross_promote", map[string]any{"user_id": "_shared", "target_namespace": ns})
	if back.Status != http.StatusOK || back.JSON(t)["written"] != true {
		t.Fatalf("cross_promote back: %d %s", back.Status, back.Body)
	}
	pv = sharedHits(t, admin, ns, "when do deploys freeze", nil)["freeze"]
	if pv == nil || pv["source_namespace"] != other || pv["source_user_id"] != "alice" {
		t.Fatalf("the row promoted back: %v", pv)
	}

	// Promote into the other namespace from the first again, then erase the first.
	if r := post(t, admin, "/v1/namespaces/"+other+"/memories/freeze:demote", nil); r.Status != http.StatusOK {
		t.Fatalf("demote in %s: %d %s", other, r.Status, r.Body)
	}
	if r := post(t, admin, "/v1/namespaces/"+ns+"/memories/freeze:cross_promote", map[string]any{"user_id": "alice", "target_namespace": other}); r.Status != http.StatusOK {
		t.Fatalf("cross_promote again: %d %s", r.Status, r.Body)
	}
	if got := sharedHits(t, admin, other, "when do deploys freeze", nil); got["freeze"] == nil {
		t.Fatalf("the copy is not served before the erasure")
	}
	admin.Erase(t, map[string]any{"namespace": ns})
	for _, where := range []string{ns, other} {
		if r := admin.Search(t, where, "when do deploys freeze", 5); strings.Contains(string(r.Body), "friday") {
			t.Fatalf("after the erasure of %s, %s still serves the fact: %s", ns, where, r.Body)
		}
	}
	if r := admin.Do(t, http.MethodGet, "/v1/namespaces/"+other+"/memories/freeze?user_id=_shared", nil); r.Status != http.StatusNotFound {
		t.Fatalf("the copy in %s after the erasure: %d %s", other, r.Status, r.Body)
	}
	pg := env.PG(t)
	if got := testenv.PGStrings(t, pg, `SELECT version::text FROM loom.memory_revisions WHERE namespace = $1 AND user_id = loom.user_ref(org, '_shared')
		AND memory_key = loom.key_ref(org, 'freeze') AND sealed IS NOT NULL AND NOT coalesce((row->>'redacted')::boolean, false)`, other); len(got) != 0 {
		t.Fatalf("the copy's versions keep their text in the journal: %v", got)
	}
}

// A decision is written with its record; deleting the decision retires the record, and
// recording it again brings the record back.
func TestDecisionDeletionRetiresItsRecord(t *testing.T) {
	_, admin, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "decisions")
	path := "/v1/namespaces/" + ns + "/decisions"
	if r := post(t, admin, path, map[string]any{"key": "db_choice", "decision": "use postgres"}); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("a decision without decided_by: %d %s; want 422", r.Status, r.Body)
	}
	rec := map[string]any{"key": "db_choice", "decision": "use postgres for the ledger", "rationale": "transactions and a mature HA story",
		"decided_by": "architecture review", "supersedes": []string{"db_choice_2023"}, "user_id": "alice"}
	r := post(t, admin, path, rec)
	if r.Status != http.StatusOK {
		t.Fatalf("decision.record: %d %s", r.Status, r.Body)
	}
	ans := r.JSON(t)
	if ans["written"] != true || ans["record"].(map[string]any)["decided_by"] != "architecture review" {
		t.Fatalf("decision.record answered %v", ans)
	}
	got := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/db_choice?user_id=alice", nil)
	if got.Status != http.StatusOK || got.JSON(t)["memory_type"] != "decision" || !strings.Contains(string(got.Body), "mature HA story") {
		t.Fatalf("the decision memory: %d %s", got.Status, got.Body)
	}
	// The record names its key by reference and seals who decided and what it
	// supersedes (migration 174): memory.inspect reads it by the decision's identity.
	state := func() string {
		t.Helper()
		s := testenv.PGStrings(t, env.PG(t), `SELECT decided_by || array_to_string(supersedes, ',') || (sealed IS NOT NULL)::text || ' ' || (retired_at IS NOT NULL)::text
			FROM loom.decision_records WHERE org = $1 AND namespace = $2 AND memory_key = loom.key_ref(org, 'db_choice') AND user_id = loom.user_ref(org, 'alice')`, org, ns)
		in := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/db_choice/inspect?user_id=alice", nil)
		if in.Status != http.StatusOK {
			t.Fatalf("inspect: %d %s", in.Status, in.Body)
		}
		if d, _ := in.JSON(t)["links"].(map[string]any)["decision_record"].(map[string]any); d != nil {
			s = append(s, fmt.Sprint(d["decided_by"], " ", d["supersedes"]))
		}
		return strings.Join(s, "|")
	}
	if s := state(); s != "true false|architecture review [db_choice_2023]" {
		t.Fatalf("the record: %q", s)
	}
	if d := admin.Do(t, http.MethodDelete, "/v1/namespaces/"+ns+"/memories/db_choice?user_id=alice", nil); d.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", d.Status, d.Body)
	}
	if s := state(); s != "true true|architecture review [db_choice_2023]" {
		t.Fatalf("the record after the decision's deletion: %q; want it retired", s)
	}
	if r := post(t, admin, path, rec); r.Status != http.StatusOK {
		t.Fatalf("decision.record again: %d %s", r.Status, r.Body)
	}
	if s := state(); s != "true false|architecture review [db_choice_2023]" {
		t.Fatalf("the record recorded again: %q", s)
	}
}

// memory.copy writes the value under another identity and leaves the source; memory.move
// across namespaces leaves it only at the target.
func TestCopyAndMoveAMemory(t *testing.T) {
	_, admin, _ := env.SharedOrgAPI(t)
	ns, other := testenv.Unique(t, "from"), testenv.Unique(t, "to")
	if r := admin.Put(t, ns, "theme", map[string]any{"value": "alice uses the solarized theme", "user_id": "alice"}); r.Status != http.StatusOK {
		t.Fatalf("write: %d %s", r.Status, r.Body)
	}
	cp := post(t, admin, "/v1/namespaces/"+ns+"/memories/theme:copy", map[string]any{"user_id": "alice", "target_user_id": "bob"})
	if cp.Status != http.StatusOK || cp.JSON(t)["user_id"] != "bob" {
		t.Fatalf("copy: %d %s", cp.Status, cp.Body)
	}
	if r := post(t, admin, "/v1/namespaces/"+ns+"/memories/theme:copy", map[string]any{"user_id": "alice", "target_user_id": "bob"}); r.Status != http.StatusConflict {
		t.Fatalf("a copy onto a live memory: %d %s; want 409", r.Status, r.Body)
	}
	mv := post(t, admin, "/v1/namespaces/"+ns+"/memories/theme:move", map[string]any{"user_id": "alice", "target_namespace": other})
	if mv.Status != http.StatusOK || mv.JSON(t)["moved"] != true {
		t.Fatalf("move: %d %s", mv.Status, mv.Body)
	}
	for _, c := range []struct {
		path string
		want int
	}{
		{"/v1/namespaces/" + ns + "/memories/theme?user_id=alice", http.StatusNotFound},
		{"/v1/namespaces/" + ns + "/memories/theme?user_id=bob", http.StatusOK},
		{"/v1/namespaces/" + other + "/memories/theme?user_id=alice", http.StatusOK},
	} {
		if r := admin.Do(t, http.MethodGet, c.path, nil); r.Status != c.want || (c.want == http.StatusOK && !strings.Contains(string(r.Body), "solarized")) {
			t.Fatalf("GET %s after the copy and the move: %d %s; want %d", c.path, r.Status, r.Body, c.want)
		}
	}
}
