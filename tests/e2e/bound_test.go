package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// A token bound to one user (read_user_id) acts on that user's rows alone, whatever
// its role: it never reads, changes or erases another user's, and what acts on every
// user's rows of a namespace is refused to it. The walk below sends every route the
// process registers, as a token bound to alice of each role, at bob's rows; a route
// the walk does not classify fails it, so a new route cannot escape it.

// bobMarker is a word only bob's rows hold: no answer to alice's tokens may carry it
// (so no probe sends it: a search echoes its terms).
const bobMarker = "zebrafinch"

// boundWorld is an org where alice and bob (and carol, erased) have rows, and what
// the walk's probes name.
type boundWorld struct {
	url, org   string
	ns, bobNS  string // ns holds alice's and bob's rows; bobNS bob's alone
	bobID      string // bob's row "drink" in ns
	bobJob     string // bob's pending ingestion job in ns
	erasureID  string // carol's erasure, run by the unbound admin
	traceID    string // a search trace of the unbound admin's
	adminToken string // the unbound admin's token id
	pool       *pgxpool.Pool
	before     string // bobState before the walk
}

func newBoundWorld(t *testing.T, n *app.Process, url string) (*boundWorld, *testenv.Client) {
	t.Helper()
	w := &boundWorld{url: url, org: testenv.Unique(t, "org"), ns: testenv.Unique(t, "bound"), bobNS: testenv.Unique(t, "bobs"), pool: env.PG(t)}
	secret, p, err := n.Tokens.Create(context.Background(), auth.NewToken{Org: w.org, Role: auth.RoleAdmin, Name: "unbound admin"})
	if err != nil {
		t.Fatal(err)
	}
	w.adminToken = p.TokenID
	admin := testenv.NewClient(url, secret)
	admin.AppendOnly(t, w.ns, w.bobNS)
	put := func(ns, key string, body map[string]any) map[string]any {
		t.Helper()
		r := admin.Put(t, ns, key, body)
		if r.Status != http.StatusOK {
			t.Fatalf("set %s/%s: %d %s", ns, key, r.Status, r.Body)
		}
		return r.JSON(t)
	}
	put(w.ns, "drink", map[string]any{"value": "alice drinks green tea", "user_id": "alice"})
	put(w.ns, "city", map[string]any{"value": "alice lives in Lisbon", "user_id": "alice"})
	w.bobID = put(w.ns, "drink", map[string]any{"value": "bob drinks " + bobMarker + " tea", "user_id": "bob",
		"entities": []string{"Zebrafinch Works"}})["memory_id"].(string)
	put(w.ns, "plan", map[string]any{"value": "bob plans the " + bobMarker + " launch", "user_id": "bob", "proposed": true})
	put(w.bobNS, "note", map[string]any{"value": "bob keeps " + bobMarker + " notes", "user_id": "bob"})
	put(w.ns, "carol", map[string]any{"value": "carol likes chess", "user_id": "carol"})
	// Bob's conversation, kept as evidence: no recall of alice's tokens may carry it.
	b, _ := json.Marshal(map[string]any{"user_id": "bob", "session_id": "s1", "turns": []map[string]any{
		{"role": "user", "content": "I only drink " + bobMarker + " tea"}, {"role": "assistant", "content": "Noted, tea it is."}}})
	if r := admin.Do(t, http.MethodPost, "/v1/namespaces/"+w.ns+"/turns", b); r.Status != http.StatusOK {
		t.Fatalf("bob's turns: %d %s", r.Status, r.Body)
	}
	// Bob's document (its title holds the marker, so a list that shows it leaks it) and
	// his ingestion job, pending (no workers role here).
	kadd(t, admin, w.ns, map[string]any{"source_uri": "bob.txt", "title": "bob's " + bobMarker + " plan",
		"content": "bob plans the " + bobMarker + " launch", "user_id": "bob"})
	b, _ = json.Marshal(map[string]any{"user_id": "bob", "documents": []map[string]any{{"source_uri": "bob-job.txt", "content": bobMarker}}})
	if r := admin.Do(t, http.MethodPost, "/v1/namespaces/"+w.ns+"/knowledge/ingestions", b); r.Status != http.StatusOK {
		t.Fatalf("bob's ingestion: %d %s", r.Status, r.Body)
	} else {
		w.bobJob = r.JSON(t)["ingestion_id"].(string)
	}
	w.erasureID = admin.Erase(t, map[string]any{"user_id": "carol", "namespace": w.ns})["id"].(string)
	b, _ = json.Marshal(map[string]any{"query": bobMarker + " tea", "trace": true})
	r := admin.Do(t, http.MethodPost, "/v1/namespaces/"+w.ns+"/memories:search", b)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), bobMarker) {
		t.Fatalf("the unbound admin's search: %d %s", r.Status, r.Body)
	}
	w.traceID, _ = r.JSON(t)["trace_id"].(string)
	w.before = w.state(t)
	return w, admin
}

// state is what no call of a token bound to alice may change: bob's rows in the
// authority, the org's namespace policies and blacklists, its erasures but alice's.
func (w *boundWorld) state(t *testing.T) string {
	t.Helper()
	return strings.Join(testenv.PGStrings(t, w.pool, `
		SELECT 'row '||namespace||'/'||(loom.opened_row(row, sealed, org, namespace, seq)->>'memory_key')||' v'||version||' '||content_sha256 FROM loom.memory_current WHERE org = $1 AND user_id = loom.user_ref(org, 'bob')
		UNION ALL SELECT 'policy '||namespace||' '||config::text||' '||updated_at::text FROM loom.namespaces WHERE org = $1
		UNION ALL SELECT 'blacklist '||namespace||' '||pattern FROM loom.blacklist WHERE org = $1
		UNION ALL SELECT 'turn '||namespace||' '||turn_id::text FROM loom.memory_evidence WHERE org = $1 AND user_id = loom.user_ref(org, 'bob')
		UNION ALL SELECT 'document '||namespace||'/'||source_uri||' v'||version||' '||deleted FROM loom.knowledge_heads WHERE org = $1 AND user_id = loom.user_ref(org, 'bob')
		UNION ALL SELECT 'job '||ingestion_id::text||' '||state||' '||coalesce(cancel_requested_at::text, '') FROM loom.knowledge_jobs WHERE org = $1 AND user_id = loom.user_ref(org, 'bob')
		UNION ALL SELECT 'dataset '||source_uri||' '||dataset_id FROM loom.knowledge_datasets WHERE org = $1
		UNION ALL SELECT 'erasure '||id FROM loom.erasure_ledger WHERE org = $1 AND loom.ledger_user(org, scope) IS DISTINCT FROM 'alice'`, w.org), "\n")
}

// probe is one request of the walk and the statuses it may answer.
type probe struct {
	method, path, body string
	want               func(role string) []int
	check              func(body []byte) error // what the answer must (not) say beyond the marker
}

// any answers the same statuses to every role; writes refuse a reader first (403);
// admins refuse a reader and a writer first (403).
func anyRole(codes ...int) func(string) []int { return func(string) []int { return codes } }

func writes(codes ...int) func(string) []int {
	return func(role string) []int {
		if role == auth.RoleReader {
			return []int{http.StatusForbidden}
		}
		return codes
	}
}

func admins(codes ...int) func(string) []int {
	return func(role string) []int {
		if role != auth.RoleAdmin {
			return []int{http.StatusForbidden}
		}
		return codes
	}
}

// send sends a probe as the token and checks its answer and the world after it.
func (w *boundWorld) send(t *testing.T, as *testenv.Client, role string, pr probe) {
	t.Helper()
	var body []byte
	if pr.body != "" {
		body = []byte(pr.body)
	}
	r := as.Do(t, pr.method, pr.path, body)
	w.after(t, fmt.Sprintf("%s %s %s", pr.method, pr.path, pr.body), r.Body)
	if want := pr.want(role); !slices.Contains(want, r.Status) {
		t.Errorf("%s token bound to alice: %s %s %s: %d %s; want one of %v", role, pr.method, pr.path, pr.body, r.Status, r.Body, want)
	}
	if pr.check != nil {
		if err := pr.check(r.Body); err != nil {
			t.Errorf("%s token bound to alice: %s %s: %v: %s", role, pr.method, pr.path, err, r.Body)
		}
	}
}

// after checks an answer to alice's token carries nothing of bob's, and that bob's
// rows, the policies and the erasures are as they were.
func (w *boundWorld) after(t *testing.T, what string, body []byte) {
	t.Helper()
	if strings.Contains(strings.ToLower(string(body)), bobMarker) {
		t.Errorf("%s: a token bound to alice read bob's rows: %s", what, body)
	}
	if now := w.state(t); now != w.before {
		t.Fatalf("%s: a token bound to alice changed what is not alice's:\nbefore:\n%s\nafter:\n%s", what, w.before, now)
	}
}

// boundRoutes classifies every route of the process: the probes a token bound to
// alice sends at it, aimed at bob's rows or at every user's.
func boundRoutes(w *boundWorld) map[string]func(t *testing.T, as *testenv.Client, role string) {
	ns, bobNS := "/v1/namespaces/"+w.ns, "/v1/namespaces/"+w.bobNS
	probes := func(ps ...probe) func(t *testing.T, as *testenv.Client, role string) {
		return func(t *testing.T, as *testenv.Client, role string) {
			for _, pr := range ps {
				w.send(t, as, role, pr)
			}
		}
	}
	var keyMethods []probe
	for _, m := range []string{"pin", "unpin", "lock", "unlock", "reject", "verify", "restore", "unsupersede"} {
		keyMethods = append(keyMethods, probe{http.MethodPost, ns + "/memories/drink:" + m, `{"user_id": "bob"}`, writes(404), nil})
	}
	keyMethods = append(keyMethods,
		probe{http.MethodPost, ns + "/memories/drink:redact", `{"version": 1, "user_id": "bob"}`, writes(404), nil},
		probe{http.MethodPost, ns + "/memories/plan:decide", `{"decision": "accept", "user_id": "bob"}`, writes(404), nil},
		probe{http.MethodPost, ns + "/memories/plan:decide", `{"decision": "reject", "user_id": "bob"}`, writes(404), nil},
		// memory.touch: another user's memory is not found, as a copy writer's.
		probe{http.MethodPost, ns + "/memories/drink:touch", `{"user_id": "bob"}`, writes(404), nil})
	// Shared scope, copy and move: bob's row is not alice's to promote, copy or move,
	// and no promotion of hers is there to demote.
	keyMethods = append(keyMethods,
		probe{http.MethodPost, ns + "/memories/drink:promote", `{"user_id": "bob"}`, writes(404), nil},
		probe{http.MethodPost, ns + "/memories/drink:cross_promote", `{"user_id": "bob", "target_namespace": "` + w.bobNS + `"}`, writes(404), nil},
		probe{http.MethodPost, ns + "/memories/drink:demote", "", writes(404), nil},
		probe{http.MethodPost, ns + "/memories/drink:copy", `{"user_id": "bob", "target_user_id": "alice", "target_key": "stolen"}`, writes(404), nil},
		probe{http.MethodPost, ns + "/memories/drink:move", `{"user_id": "bob", "target_user_id": "alice", "target_key": "stolen"}`, writes(404), nil},
		probe{http.MethodPost, ns + "/memories/city:copy", `{"target_user_id": "bob"}`, writes(403, 404), nil}) // 404 once a clear probe took city
	// memory.assign_category: bob's memory is not found, as a copy writer's.
	keyMethods = append(keyMethods,
		probe{http.MethodPost, ns + "/memories/drink:assign_category", `{"user_id": "bob", "categories": ["stolen"]}`, writes(404), nil})
	now := time.Now().UTC().Format(time.RFC3339Nano)
	minimalHealth := func(b []byte) error {
		if strings.TrimSpace(string(b)) != `{"status":"ok"}` {
			return fmt.Errorf("health told more than its status")
		}
		return nil
	}
	return map[string]func(t *testing.T, as *testenv.Client, role string){
		// The write side.
		"PUT /v1/namespaces/:ns/memories/:key": probes(
			probe{http.MethodPut, ns + "/memories/drink", `{"value": "overwritten", "user_id": "bob"}`, writes(403), nil},
			probe{http.MethodPut, bobNS + "/memories/note", `{"value": "overwritten", "user_id": "bob"}`, writes(403), nil}),
		"POST /v1/namespaces/:ns/memories/:key": probes(keyMethods...),
		"DELETE /v1/namespaces/:ns/memories/:key": probes(
			probe{http.MethodDelete, ns + "/memories/drink?user_id=bob", "", writes(404), nil},
			probe{http.MethodDelete, ns + "/memories/drink?user_id=bob&version=1", "", writes(404), nil}),
		"PATCH /v1/namespaces/:ns/memories/:key": probes(
			probe{http.MethodPatch, ns + "/memories/drink", `{"value": "revised", "user_id": "bob"}`, writes(404), nil}),
		// The by-id forms of verify and redact: bob's id is not found by alice's tokens.
		"POST /v1/memories/:id": probes(
			probe{http.MethodPost, "/v1/memories/" + w.bobID + ":verify", "", writes(404), nil},
			probe{http.MethodPost, "/v1/memories/" + w.bobID + ":redact", `{"version": 1}`, writes(404), nil}),
		"PATCH /v1/memories/:id": probes(
			probe{http.MethodPatch, "/v1/memories/" + w.bobID, `{"value": "revised"}`, writes(404), nil}),
		"POST /v1/namespaces/:ns/memories:sweepExpired": probes(
			probe{http.MethodPost, ns + "/memories:sweepExpired", "", admins(200), nil}),
		"POST /v1/namespaces/:ns/memories:clear": probes(
			probe{http.MethodPost, ns + "/memories:clear", `{"user_id": "bob"}`, writes(404), nil},
			probe{http.MethodPost, bobNS + "/memories:clear", `{}`, writes(200), nil},
			probe{http.MethodPost, ns + "/memories:clear", `{}`, writes(200), nil}),
		"POST /v1/namespaces/:ns/memories:bulkSet": probes(
			probe{http.MethodPost, ns + "/memories:bulkSet", `{"entries": [{"key": "drink", "value": "x", "user_id": "bob"}]}`, writes(403), nil}),
		"POST /v1/namespaces/:ns/memories:fromMessages": probes(
			probe{http.MethodPost, ns + "/memories:fromMessages", `{"messages": [{"role": "user", "content": "I drink coffee"}], "user_id": "bob"}`, writes(403), nil}),
		"POST /v1/namespaces/:ns/memories:import": probes(
			probe{http.MethodPost, ns + "/memories:import", `{"items": [{"text": "bob drinks coffee"}], "user_id": "bob"}`, writes(403), nil}),
		"POST /v1/namespaces/:ns/turns": probes(
			probe{http.MethodPost, ns + "/turns", `{"turns": [{"role": "user", "content": "I drink coffee"}], "user_id": "bob"}`, writes(403), nil}),
		"POST /v1/namespaces/:ns/turns:crystallize": probes(
			probe{http.MethodPost, ns + "/turns:crystallize", `{"user_id": "bob", "session_id": "s1"}`, writes(403), nil}),
		"POST /v1/extractions:retry": probes(
			probe{http.MethodPost, "/v1/extractions:retry", `{"queue_ids": ["00000000-0000-4000-8000-000000000001"]}`, writes(200), nil}),
		"GET /v1/namespaces/:ns": probes(probe{http.MethodGet, ns, "", anyRole(200), nil}),
		"PUT /v1/namespaces/:ns": probes(
			probe{http.MethodPut, ns, `{"conflict_policy": "newest_wins"}`, anyRole(403), nil}),
		"POST /v1/namespaces/:ns:restore": probes(
			probe{http.MethodPost, ns + ":restore", `{}`, anyRole(403), nil}),
		"POST /v1/namespaces/:ns:rollback": probes(
			probe{http.MethodPost, ns + ":rollback", `{"as_of": "` + now + `"}`, anyRole(403), nil}),
		"GET /v1/namespaces/:ns/blacklist":    probes(probe{http.MethodGet, ns + "/blacklist", "", anyRole(200), nil}),
		"POST /v1/namespaces/:ns/blacklist":   probes(probe{http.MethodPost, ns + "/blacklist", `{"pattern": "tea"}`, anyRole(403), nil}),
		"DELETE /v1/namespaces/:ns/blacklist": probes(probe{http.MethodDelete, ns + "/blacklist", `{"pattern": "tea"}`, anyRole(403), nil}),
		// The conflict allowlist: bob's memory is not found by alice's tokens; the list
		// names ids alone, and only of alice's rows.
		"GET /v1/namespaces/:ns/conflict-allowlist": probes(probe{http.MethodGet, ns + "/conflict-allowlist", "", anyRole(200), nil}),
		"POST /v1/namespaces/:ns/conflict-allowlist": probes(probe{http.MethodPost, ns + "/conflict-allowlist",
			`{"memory_ids": ["` + w.bobID + `", "00000000-0000-4000-8000-000000000001"]}`, writes(404), nil}),
		"DELETE /v1/namespaces/:ns/conflict-allowlist": probes(probe{http.MethodDelete, ns + "/conflict-allowlist",
			`{"memory_ids": ["` + w.bobID + `", "00000000-0000-4000-8000-000000000001"]}`, writes(404), nil}),
		"POST /v1/namespaces/:ns/blacklist:sweep": probes(
			probe{http.MethodPost, ns + "/blacklist:sweep", `{}`, anyRole(403), nil}),
		// Profiles and consolidation: an admin's of every user (a bound admin may
		// consolidate its own user's rows, never bob's or every user's).
		"PUT /v1/namespaces/:ns/profile-schema": probes(
			probe{http.MethodPut, ns + "/profile-schema", `{"schema": {"type": "object", "additionalProperties": false, "properties": {}, "required": []}}`, anyRole(403), nil}),
		"POST /v1/namespaces/:ns/memories:consolidate": probes(
			probe{http.MethodPost, ns + "/memories:consolidate", `{"user_id": "bob", "dry_run": true}`, anyRole(403), nil},
			probe{http.MethodPost, ns + "/memories:consolidate", `{"dry_run": true}`, anyRole(403), nil}),
		"POST /v1/namespaces/:ns/consolidations/:run_id:undo": probes(
			probe{http.MethodPost, ns + "/consolidations/00000000-0000-4000-8000-000000000001:undo", "", admins(404), nil}),
		"POST /v1/erasures": probes(
			probe{http.MethodPost, "/v1/erasures", `{"user_id": "bob", "namespace": "` + w.ns + `"}`, anyRole(403), nil},
			probe{http.MethodPost, "/v1/erasures", `{"user_id": "bob"}`, anyRole(403), nil},
			probe{http.MethodPost, "/v1/erasures", `{"namespace": "` + w.bobNS + `"}`, anyRole(403), nil},
			probe{http.MethodPost, "/v1/erasures", `{"namespaces": ["` + w.ns + `", "` + w.bobNS + `"]}`, anyRole(403), nil}),
		"GET /v1/erasures/:erasure_id": probes(probe{http.MethodGet, "/v1/erasures/" + w.erasureID, "", admins(404), nil}),
		// The org's model-call switch acts on the whole org: a token bound to a user is refused.
		"GET /v1/orgs/self/model-calls": probes(probe{http.MethodGet, "/v1/orgs/self/model-calls", "", anyRole(403), nil}),
		"PUT /v1/orgs/self/model-calls": probes(probe{http.MethodPut, "/v1/orgs/self/model-calls", `{"held": true}`, anyRole(403), nil}),
		"POST /v1/namespaces/:ns/decisions": probes(
			probe{http.MethodPost, ns + "/decisions", `{"key": "drink", "decision": "bob drinks water", "decided_by": "alice", "user_id": "bob"}`, writes(403), nil}),
		"DELETE /v1/namespaces/:ns": probes(probe{http.MethodDelete, ns, "", anyRole(403), nil}),

		// The read side.
		"POST /v1/namespaces/:ns/memories:search": probes(
			probe{http.MethodPost, ns + "/memories:search", `{"query": "who drinks tea", "user_id": "bob"}`, anyRole(200), nil},
			probe{http.MethodPost, ns + "/memories:search", `{"query": "who drinks tea"}`, anyRole(200), nil},
			probe{http.MethodPost, bobNS + "/memories:search", `{"query": "what notes does bob keep"}`, anyRole(200), nil}),
		// What an agent reads before it answers: alice's rows alone, whichever user the
		// request names (bob's marker would show in a fact, a change, a count or an entity).
		"POST /v1/namespaces/:ns/context:pack": probes(
			probe{http.MethodPost, ns + "/context:pack", `{"query": "who drinks tea", "user_id": "bob"}`, anyRole(200), nil},
			probe{http.MethodPost, ns + "/context:pack", `{"query": "who drinks tea", "format": "json"}`, anyRole(200), nil},
			probe{http.MethodPost, bobNS + "/context:pack", `{"query": "what notes does bob keep"}`, anyRole(200), nil}),
		"POST /v1/namespaces/:ns/context:stack": probes(
			probe{http.MethodPost, ns + "/context:stack", `{"query": "who drinks tea", "user_id": "bob"}`, anyRole(200), nil},
			probe{http.MethodPost, ns + "/context:stack", `{"query": "who drinks tea"}`, anyRole(200), nil}),
		"GET /v1/namespaces/:ns/timeline": probes(
			probe{http.MethodGet, ns + "/timeline?key=drink&user_id=bob", "", anyRole(404), nil},
			probe{http.MethodGet, ns + "/timeline?user_id=bob", "", anyRole(200), nil},
			probe{http.MethodGet, ns + "/timeline", "", anyRole(200), nil}),
		"GET /v1/namespaces/:ns/memories/:key/related": probes(
			probe{http.MethodGet, ns + "/memories/drink/related?user_id=bob", "", anyRole(404), nil},
			probe{http.MethodGet, ns + "/memories/drink/related", "", anyRole(200, 404), nil}),
		"GET /v1/namespaces/:ns/memories:aggregate": probes(
			probe{http.MethodGet, ns + "/memories:aggregate?user_id=bob", "", anyRole(200), nil},
			probe{http.MethodGet, ns + "/memories:aggregate", "", anyRole(200), nil},
			probe{http.MethodGet, bobNS + "/memories:aggregate?by=entity,tag", "", anyRole(200), nil}),
		"POST /v1/namespaces/:ns/memories:statuses": probes(
			probe{http.MethodPost, ns + "/memories:statuses", `{"keys": [{"memory_key": "drink", "user_id": "bob"}, {"memory_key": "plan"}]}`, anyRole(200),
				func(b []byte) error {
					if strings.Contains(string(b), `"live"`) {
						return fmt.Errorf("a status of bob's key answered")
					}
					return nil
				}}),
		"POST /v1/namespaces/:ns/memories:recall": probes(
			probe{http.MethodPost, ns + "/memories:recall", `{"query": "what tea does bob drink?", "user_id": "bob"}`, anyRole(403), nil},
			probe{http.MethodPost, ns + "/memories:recall", `{"query": "what tea does bob drink?"}`, anyRole(200), nil},
			probe{http.MethodPost, ns + "/memories:recall", `{"memory_id": "` + w.bobID + `"}`, anyRole(404), nil},
			probe{http.MethodPost, ns + "/memories:recall", `{"key": "drink", "user_id": "bob"}`, anyRole(403), nil}),
		"POST /v1/namespaces/:ns/memories:ask": probes(
			probe{http.MethodPost, ns + "/memories:ask", `{"query": "what does bob drink?", "user_id": "bob"}`, anyRole(200, 503), nil}),
		// The org's namespaces, bob's alone among them (a name is not a row), each
		// counting alice's rows only.
		"GET /v1/namespaces": probes(probe{http.MethodGet, "/v1/namespaces?limit=500", "", anyRole(200), func(b []byte) error {
			var a struct {
				Namespaces []struct {
					Namespace string `json:"namespace"`
					Memories  int    `json:"memories"`
				} `json:"namespaces"`
			}
			if err := json.Unmarshal(b, &a); err != nil {
				return err
			}
			counts := map[string]int{}
			for _, n := range a.Namespaces {
				counts[n.Namespace] = n.Memories
			}
			if c, ok := counts[w.bobNS]; ok {
				return fmt.Errorf("bob's namespace listed (%d memories); want it unlisted: it holds none of alice's rows", c)
			}
			if c := counts[w.ns]; c > 2 { // unlisted once the walk's other probes removed alice's rows
				return fmt.Errorf("the shared namespace listed with %d memories; want alice's two at most", c)
			}
			return nil
		}}),
		"GET /v1/namespaces/:ns/profiles/:user_id": probes(
			probe{http.MethodGet, ns + "/profiles/bob", "", anyRole(404), nil}),
		"GET /v1/namespaces/:ns/profiles/:user_id/render": probes(
			probe{http.MethodGet, ns + "/profiles/bob/render", "", anyRole(404), nil}),
		// A session's digest: bob's session has none alice's tokens may read.
		"GET /v1/namespaces/:ns/sessions/:session_id/digest": probes(
			probe{http.MethodGet, ns + "/sessions/s1/digest", "", anyRole(404), nil}),
		// The learnings queue: alice's token lists only what alice supports, never bob's quotes.
		"GET /v1/namespaces/:ns/learnings": probes(
			probe{http.MethodGet, ns + "/learnings", "", writes(200), func(b []byte) error {
				if strings.Contains(string(b), `"bob"`) {
					return fmt.Errorf("listed a learning bob supports")
				}
				return nil
			}}),
		"GET /v1/namespaces/:ns/memories": probes(
			probe{http.MethodGet, ns + "/memories?user_id=bob", "", anyRole(200), nil},
			probe{http.MethodGet, ns + "/memories?include_tombstoned=true", "", anyRole(200), nil},
			probe{http.MethodGet, bobNS + "/memories", "", anyRole(200), nil}),
		"GET /v1/namespaces/:ns/keys": probes(
			probe{http.MethodGet, ns + "/keys?user_id=bob", "", anyRole(200), nil},
			probe{http.MethodGet, bobNS + "/keys", "", anyRole(200), func(b []byte) error {
				if strings.Contains(string(b), `"note"`) {
					return fmt.Errorf("listed bob's key")
				}
				return nil
			}}),
		"GET /v1/namespaces/:ns/memories/:key/history": probes(
			probe{http.MethodGet, ns + "/memories/drink/history?user_id=bob", "", anyRole(404), nil}),
		"GET /v1/namespaces/:ns/memories/:key": probes(
			probe{http.MethodGet, ns + "/memories/drink?user_id=bob", "", anyRole(404), nil},
			probe{http.MethodGet, bobNS + "/memories/note?user_id=bob", "", anyRole(404), nil}),
		"GET /v1/memories/:id": probes(probe{http.MethodGet, "/v1/memories/" + w.bobID, "", anyRole(404), nil}),
		"GET /v1/namespaces/:ns/memories/:key/inspect": probes(
			probe{http.MethodGet, ns + "/memories/drink/inspect?user_id=bob", "", anyRole(404), nil}),
		// alice's rows alone are counted.
		"GET /v1/namespaces/:ns/inventory": probes(probe{http.MethodGet, ns + "/inventory", "", anyRole(200), func(b []byte) error {
			if strings.Contains(string(b), `"bob"`) {
				return fmt.Errorf("counted bob's rows")
			}
			return nil
		}}),
		"GET /v1/namespaces/:ns/graph/entities/:name": probes(
			probe{http.MethodGet, ns + "/graph/entities/" + url.PathEscape("Zebrafinch Works"), "", anyRole(200, 404), nil}),
		// The categories read counts alice's rows and the shared scope's; validate and
		// tune name or read every user's rows: refused to a bound token.
		"GET /v1/namespaces/:ns/categories": probes(probe{http.MethodGet, ns + "/categories", "", anyRole(200), nil}),
		"GET /v1/namespaces/:ns/validate":   probes(probe{http.MethodGet, ns + "/validate", "", anyRole(403), nil}),
		"GET /v1/namespaces/:ns/tune":       probes(probe{http.MethodGet, ns + "/tune", "", anyRole(403), nil}),
		// namespace.audit names every writer of the namespace: refused to a bound token.
		"GET /v1/namespaces/:ns/audit":       probes(probe{http.MethodGet, ns + "/audit", "", anyRole(403), nil}),
		"GET /v1/namespaces/:ns/extractions": probes(probe{http.MethodGet, ns + "/extractions", "", admins(200), nil}),
		"GET /v1/extractions":                probes(probe{http.MethodGet, "/v1/extractions", "", anyRole(200), nil}),
		"GET /v1/extractions/:queue_id": probes(
			probe{http.MethodGet, "/v1/extractions/00000000-0000-4000-8000-000000000001", "", anyRole(200, 404), nil}),
		"POST /v1/namespaces/:ns/memories:bulkGet": probes(
			probe{http.MethodPost, ns + "/memories:bulkGet", `{"keys": [{"memory_key": "drink", "user_id": "bob"}], "ids": ["` + w.bobID + `"]}`, anyRole(200), nil}),
		"POST /v1/namespaces/:ns:snapshot": probes(probe{http.MethodPost, ns + ":snapshot", "", anyRole(403), nil}),
		"GET /v1/exports":                  probes(probe{http.MethodGet, "/v1/exports?user_id=bob", "", anyRole(403), nil}),
		"GET /v1/search-traces/:trace_id": probes(
			probe{http.MethodGet, "/v1/search-traces/" + w.traceID, "", anyRole(404), nil}),

		// The deployment's and the org's controls.
		"POST /v1/admin/projections/:name:reset": probes(
			probe{http.MethodPost, "/v1/admin/projections/main:reset", `{"to": "earliest"}`, anyRole(403), nil}),
		"POST /v1/admin/tokens": probes(probe{http.MethodPost, "/v1/admin/tokens", `{"role": "admin"}`, anyRole(403), nil}),
		"GET /v1/admin/tokens":  probes(probe{http.MethodGet, "/v1/admin/tokens", "", anyRole(403), nil}),
		"GET /v1/token": probes(probe{http.MethodGet, "/v1/token", "", anyRole(200), func(b []byte) error {
			if !strings.Contains(string(b), `"read_user_id":"alice"`) {
				return fmt.Errorf("token.self does not name the token's user")
			}
			return nil
		}}),
		"USE /console": probes(probe{http.MethodGet, "/console/", "", anyRole(200), nil}),
		"DELETE /v1/admin/tokens/:token_id": probes(
			probe{http.MethodDelete, "/v1/admin/tokens/" + w.adminToken, "", anyRole(403), nil}),
		"GET /v1/health": probes(
			probe{http.MethodGet, "/v1/health?include=postgres,lag", "", anyRole(200), minimalHealth}),
		"GET /v1/health/ready": probes(probe{http.MethodGet, "/v1/health/ready", "", anyRole(200), nil}),
		"GET /metrics":         probes(probe{http.MethodGet, "/metrics", "", anyRole(200), nil}),

		// The knowledge plane: a token bound to alice reads the namespace's documents and
		// alice's, writes alice's, and finds bob's (bob.txt, his job) absent.
		"POST /v1/namespaces/:ns/knowledge": probes(
			probe{http.MethodPost, ns + "/knowledge", `{"source_uri": "a.txt", "content": "x", "user_id": "bob"}`, writes(403), nil},
			probe{http.MethodPost, ns + "/knowledge", `{"source_uri": "bob.txt", "content": "x"}`, writes(409), nil}),
		"PUT /v1/namespaces/:ns/knowledge": probes(
			probe{http.MethodPut, ns + "/knowledge", `{"source_uri": "bob.txt", "content": "x"}`, writes(409), nil}),
		"POST /v1/namespaces/:ns/knowledge:bulkAdd": probes(
			probe{http.MethodPost, ns + "/knowledge:bulkAdd", `{"documents": [{"source_uri": "a.txt", "content": "x", "user_id": "bob"}]}`, writes(403), nil}),
		"DELETE /v1/namespaces/:ns/knowledge/document": probes(
			probe{http.MethodDelete, ns + "/knowledge/document?source_uri=bob.txt", "", writes(404), nil}),
		"POST /v1/namespaces/:ns/knowledge/document:restore": probes(
			probe{http.MethodPost, ns + "/knowledge/document:restore", `{"source_uri": "bob.txt"}`, writes(404), nil}),
		"GET /v1/namespaces/:ns/knowledge": probes(probe{http.MethodGet, ns + "/knowledge", "", anyRole(200), nil},
			probe{http.MethodGet, ns + "/knowledge?user_id=bob", "", anyRole(200), nil}),
		"GET /v1/namespaces/:ns/knowledge/document": probes(
			probe{http.MethodGet, ns + "/knowledge/document?source_uri=bob.txt", "", anyRole(404), nil}),
		"GET /v1/namespaces/:ns/knowledge/outline": probes(
			probe{http.MethodGet, ns + "/knowledge/outline?source_uri=bob.txt", "", anyRole(404), nil}),
		"GET /v1/namespaces/:ns/knowledge/inspect": probes(probe{http.MethodGet, ns + "/knowledge/inspect", "", anyRole(200), nil}),
		"GET /v1/namespaces/:ns/knowledge/datasets": probes(
			probe{http.MethodGet, ns + "/knowledge/datasets?source_uri=bob.txt", "", anyRole(404), nil}),
		"POST /v1/namespaces/:ns/knowledge/datasets:approve": probes(
			probe{http.MethodPost, ns + "/knowledge/datasets:approve", `{"source_uri": "bob.txt", "dataset_id": "table-1", "version": 1}`, writes(404), nil}),
		"POST /v1/namespaces/:ns/knowledge/datasets:query": probes(
			probe{http.MethodPost, ns + "/knowledge/datasets:query", `{"source_uri": "bob.txt", "dataset_id": "table-1", "query": {}}`, anyRole(404), nil}),
		"POST /v1/namespaces/:ns/knowledge:synthesize": probes(
			probe{http.MethodPost, ns + "/knowledge:synthesize", `{"query": "who plans a launch", "user_id": "bob"}`, anyRole(200, 503), nil}),
		"POST /v1/namespaces/:ns/knowledge/ingestions": probes(
			probe{http.MethodPost, ns + "/knowledge/ingestions", `{"documents": [{"source_uri": "a.txt", "content": "x"}], "user_id": "bob"}`, writes(403), nil}),
		"POST /v1/namespaces/:ns/knowledge/ingestions/:ingestion_id:cancel": probes(
			probe{http.MethodPost, ns + "/knowledge/ingestions/" + w.bobJob + ":cancel", "", writes(404), nil}),
		"GET /v1/namespaces/:ns/knowledge/ingestions/:ingestion_id": probes(
			probe{http.MethodGet, ns + "/knowledge/ingestions/" + w.bobJob, "", anyRole(404), nil}),
		"POST /v1/namespaces/:ns/knowledge:search": probes(
			probe{http.MethodPost, ns + "/knowledge:search", `{"query": "who plans a launch"}`, anyRole(200), nil},
			probe{http.MethodPost, ns + "/knowledge:search", `{"query": "who plans a launch", "user_id": "bob"}`, anyRole(200), nil}),

		// The adapters call the REST routes with the caller's token.
		"USE /mem0": func(t *testing.T, as *testenv.Client, role string) {
			q := "?user_id=bob&app_id=" + w.ns
			w.send(t, as, role, probe{http.MethodDelete, "/mem0/v1/memories/" + q, "", anyRole(403, 404), nil})
			w.send(t, as, role, probe{http.MethodPost, "/mem0/v3/memories/search/", `{"query": "who drinks tea", "user_id": "bob", "app_id": "` + w.ns + `"}`, anyRole(200), nil})
			w.send(t, as, role, probe{http.MethodGet, "/mem0/v1/memories/" + w.bobID + "/", "", anyRole(404), nil})
		},
		"USE /mcp": func(t *testing.T, as *testenv.Client, role string) {
			cs := goSDKSession(t, &sdk.StreamableClientTransport{Endpoint: w.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{as.Token}}})
			for _, call := range []struct {
				tool    string
				args    map[string]any
				refused bool
			}{
				{"memory_delete", map[string]any{"namespace": w.ns, "key": "drink", "user_id": "bob"}, true},
				{"memory_get", map[string]any{"namespace": w.ns, "key": "drink", "user_id": "bob"}, true},
				{"memory_history", map[string]any{"namespace": w.ns, "key": "drink", "user_id": "bob"}, true},
				{"memory_set", map[string]any{"namespace": w.ns, "key": "drink", "value": "overwritten", "user_id": "bob"}, true},
				{"memory_list", map[string]any{"namespace": w.bobNS}, false},
				{"memory_search", map[string]any{"namespace": w.ns, "query": "who drinks tea"}, false},
				{"knowledge_add", map[string]any{"namespace": w.ns, "source_uri": "a.txt", "content": "x", "user_id": "bob"}, true},
				{"knowledge_add", map[string]any{"namespace": w.ns, "source_uri": "bob.txt", "content": "x"}, true},
				{"knowledge_search", map[string]any{"namespace": w.ns, "query": "who drinks tea"}, false},
				{"knowledge_synthesize", map[string]any{"namespace": w.ns, "query": "who drinks tea"}, false},
				{"memory_context", map[string]any{"namespace": w.ns, "query": "who drinks tea", "user_id": "bob"}, false},
				{"memory_timeline", map[string]any{"namespace": w.ns, "key": "drink", "user_id": "bob"}, true},
				{"profile_schema_set", map[string]any{"namespace": w.ns, "schema": map[string]any{"type": "object",
					"additionalProperties": false, "properties": map[string]any{}, "required": []any{}}}, true},
				{"memory_consolidate", map[string]any{"namespace": w.ns, "user_id": "bob", "dry_run": true}, true},
				{"memory_consolidate", map[string]any{"namespace": w.ns, "dry_run": true}, true},
				{"memory_consolidate_undo", map[string]any{"namespace": w.ns, "run_id": "00000000-0000-4000-8000-000000000001"}, true},
				{"memory_learnings", map[string]any{"namespace": w.ns, "agent": "-"}, false},
			} {
				res := callTool(t, cs, call.tool, call.args)
				text := resultText(res)
				b, _ := json.Marshal(res.StructuredContent)
				w.after(t, "mcp "+call.tool, append([]byte(text), b...))
				if call.refused && !res.IsError {
					t.Errorf("%s token bound to alice: mcp %s %v was not refused: %s", role, call.tool, call.args, text)
				}
			}
		},
	}
}

// middleware are the registered handlers that serve no route of their own: the
// migration gate, the /v1 token check and the last 404.
var boundMiddleware = map[string]bool{"USE /": true, "USE /v1": true}

// registeredRoutes are the process's routes, "METHOD /path" (HEAD beside GET left
// out), and its mounts ("USE /path": app.Use handlers, the adapters among them).
func registeredRoutes(n *app.Process) []string {
	clean := func(p string) string { return strings.ReplaceAll(p, `\`, "") }
	seen := map[string]bool{}
	routes := map[string]bool{}
	for _, r := range n.HTTP.GetRoutes(true) {
		k := r.Method + " " + clean(r.Path)
		routes[k] = true
		if r.Method != http.MethodHead { // fiber's twin of a GET
			seen[k] = true
		}
	}
	for _, r := range n.HTTP.GetRoutes(false) {
		if !routes[r.Method+" "+clean(r.Path)] {
			seen["USE "+clean(r.Path)] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestUserBoundTokensWalkEveryRoute(t *testing.T) {
	n, url := env.SharedAPI(t)
	w, _ := newBoundWorld(t, n, url)
	walk := boundRoutes(w)
	routes := registeredRoutes(n)
	var unclassified []string
	for _, r := range routes {
		if walk[r] == nil && !boundMiddleware[r] {
			unclassified = append(unclassified, r)
		}
	}
	if len(unclassified) > 0 {
		t.Fatalf("routes the walk does not classify (give each its probes in boundRoutes):\n%s", strings.Join(unclassified, "\n"))
	}
	for k := range walk {
		if !slices.Contains(routes, k) {
			t.Errorf("the walk classifies %s, which the process does not register", k)
		}
	}
	for _, role := range []string{auth.RoleReader, auth.RoleWriter, auth.RoleAdmin} {
		as := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: w.org, Role: role, ReadUserID: "alice"}))
		for _, r := range routes {
			if walk[r] != nil {
				t.Run(role+" "+r, func(t *testing.T) { walk[r](t, as, role) })
			}
		}
	}
}

// The sweep's case: an admin token bound to alice erased bob, a whole namespace and
// carol everywhere, swept bob's rows with a blacklist pattern and changed the policy
// of every user. Each is refused and erases nothing; alice's own erasure still runs.
func TestUserBoundAdminErasesOnlyItsUser(t *testing.T) {
	n, url := env.SharedAPI(t)
	w, admin := newBoundWorld(t, n, url)
	alice := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: w.org, Role: auth.RoleAdmin, ReadUserID: "alice"}))
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/erasures", `{"user_id": "bob", "namespace": "` + w.ns + `"}`},
		{http.MethodPost, "/v1/erasures", `{"namespaces": ["` + w.bobNS + `"]}`},
		{http.MethodPost, "/v1/erasures", `{"namespace": "` + w.ns + `"}`},
		{http.MethodPost, "/v1/erasures", `{"user_id": "carol"}`},
		{http.MethodPost, "/v1/namespaces/" + w.ns + "/blacklist", `{"pattern": "` + bobMarker + `"}`},
		{http.MethodPost, "/v1/namespaces/" + w.ns + "/blacklist:sweep", `{}`},
		{http.MethodPut, "/v1/namespaces/" + w.ns, `{"conflict_policy": "newest_wins"}`},
	} {
		r := alice.Do(t, c.method, c.path, []byte(c.body))
		if r.Status != http.StatusForbidden || r.ErrorCode() != "PERMISSION_DENIED" {
			t.Errorf("%s %s %s as an admin bound to alice: %d %s; want 403 PERMISSION_DENIED", c.method, c.path, c.body, r.Status, r.Body)
		}
		w.after(t, c.method+" "+c.path+" "+c.body, r.Body)
	}
	// Clearing another user's rows answers as the docs say: not found.
	if r := alice.Do(t, http.MethodPost, "/v1/namespaces/"+w.ns+"/memories:clear", []byte(`{"user_id": "bob"}`)); r.Status != http.StatusNotFound {
		t.Errorf("clear naming bob as a token bound to alice: %d %s; want 404", r.Status, r.Body)
	}
	// Alice's own erasure runs, and leaves bob's rows as they are.
	view := alice.Erase(t, map[string]any{"user_id": "alice", "namespace": w.ns})
	w.after(t, "alice's erasure", nil)
	if r := alice.Do(t, http.MethodGet, "/v1/erasures/"+w.erasureID, nil); r.Status != http.StatusNotFound {
		t.Errorf("carol's erasure read by a token bound to alice: %d %s; want 404", r.Status, r.Body)
	}
	if r := admin.Do(t, http.MethodGet, "/v1/erasures/"+view["id"].(string), nil); r.Status != http.StatusOK {
		t.Errorf("alice's erasure read by the org's admin: %d %s", r.Status, r.Body)
	}
	if n := testenv.Int(t, w.pool, `SELECT count(*) FROM loom.memory_current WHERE org = $1 AND user_id = loom.user_ref(org, 'alice')`, w.org); n != 0 {
		t.Errorf("alice's erasure left %d of her rows", n)
	}
}

// POST /v1/admin/tokens: a ttl_seconds no duration holds is a validation error naming
// ttl_seconds (it overflowed into the past and was refused as an invalid token
// against expires_at); a namespace list is stored once per name and bounded.
func TestTokenRequestBounds(t *testing.T) {
	n, url := env.SharedAPI(t)
	org := testenv.Unique(t, "org")
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	field := func(r *testenv.Response) string {
		e, _ := r.JSON(t)["error"].(map[string]any)
		f, _ := e["field"].(string)
		return f
	}
	for _, ttl := range []string{"9223372036854775807", "315360001"} {
		r := admin.Do(t, http.MethodPost, "/v1/admin/tokens", []byte(`{"role": "reader", "ttl_seconds": `+ttl+`}`))
		if r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "VALIDATION_FAILED" || field(r) != "ttl_seconds" {
			t.Errorf("ttl_seconds %s: %d %s; want 422 naming ttl_seconds", ttl, r.Status, r.Body)
		}
	}
	if r := admin.Do(t, http.MethodPost, "/v1/admin/tokens", []byte(`{"role": "reader", "ttl_seconds": 315360000}`)); r.Status != http.StatusCreated {
		t.Errorf("ttl_seconds of ten years: %d %s", r.Status, r.Body)
	}

	same := make([]string, 10000)
	for i := range same {
		same[i] = "scratch"
	}
	b, _ := json.Marshal(map[string]any{"role": "reader", "namespaces": same})
	r := admin.Do(t, http.MethodPost, "/v1/admin/tokens", b)
	if r.Status != http.StatusCreated {
		t.Fatalf("10,000 copies of one namespace: %d %.300s", r.Status, r.Body)
	}
	id := r.JSON(t)["token_id"].(string)
	if got := testenv.PGStrings(t, env.PG(t), `SELECT unnest(namespaces) FROM loom.api_tokens WHERE token_id = $1`, id); len(got) != 1 || got[0] != "scratch" {
		t.Errorf("the token stored namespaces %d names; want [scratch]", len(got))
	}
	distinct := make([]string, auth.MaxNamespaces+1)
	for i := range distinct {
		distinct[i] = fmt.Sprintf("ns-%d", i)
	}
	b, _ = json.Marshal(map[string]any{"role": "reader", "namespaces": distinct})
	if r := admin.Do(t, http.MethodPost, "/v1/admin/tokens", b); r.Status != http.StatusUnprocessableEntity || field(r) != "namespaces" {
		t.Errorf("%d distinct namespaces: %d %s; want 422 naming namespaces", len(distinct), r.Status, r.Body)
	}
}

// Under /v1 the token is checked before the route: an unknown route answers 401
// without a token and 403 with the operator's (which reaches no org's memory), as the
// API's description says; an org's token gets the 404.
func TestUnknownRoutesAnswerAfterTheToken(t *testing.T) {
	n, url := env.SharedAPI(t)
	for _, c := range []struct {
		token  string
		status int
	}{
		{"", http.StatusUnauthorized},
		{env.Token(t, n, auth.NewToken{Role: auth.RoleOperator}), http.StatusForbidden},
		{env.Token(t, n, auth.NewToken{Org: testenv.Unique(t, "org")}), http.StatusNotFound},
	} {
		if r := testenv.NewClient(url, c.token).Do(t, http.MethodGet, "/v1/no-such-route", nil); r.Status != c.status {
			t.Errorf("an unknown route: %d %s; want %d", r.Status, r.Body, c.status)
		}
	}
}
