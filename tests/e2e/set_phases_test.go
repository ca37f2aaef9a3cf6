package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// phaseEnv is one namespace with a client, and reads of what the stores hold.
type phaseEnv struct {
	t    *testing.T
	c    *testenv.Client
	pool *pgxpool.Pool
	ns   string
	org  string
}

// newPhaseEnv configures a fresh namespace (nil: the defaults). Its API node's
// thresholds let the hash embedder's cosines of short statements reach the verdicts;
// the phase tests share the node.
func newPhaseEnv(t *testing.T, cfg map[string]any) *phaseEnv {
	n, url := env.Shared(t, "phases", func(c *config.Config) { c.Command.ConflictThreshold, c.Command.DuplicateThreshold = 0.5, 0.8 })
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	e := &phaseEnv{t: t, c: c, pool: env.PG(t), ns: testenv.Unique(t, "ph"), org: "acme"}
	if cfg != nil {
		c.Configure(t, e.ns, cfg)
	}
	return e
}

func (e *phaseEnv) put(key string, body map[string]any) *testenv.Response {
	e.t.Helper()
	b, _ := json.Marshal(body)
	return e.c.Do(e.t, http.MethodPut, "/v1/namespaces/"+e.ns+"/memories/"+key, b)
}

func (e *phaseEnv) ok(key string, body map[string]any) map[string]any {
	e.t.Helper()
	r := e.put(key, body)
	if r.Status != http.StatusOK {
		e.t.Fatalf("PUT %s: %d %s", key, r.Status, r.Body)
	}
	return r.JSON(e.t)
}

func (e *phaseEnv) refused(key string, body map[string]any, status int, code string) map[string]any {
	e.t.Helper()
	r := e.put(key, body)
	if r.Status != status || r.ErrorCode() != code {
		e.t.Fatalf("PUT %s: %d %s, want %d %s", key, r.Status, r.Body, status, code)
	}
	return r.JSON(e.t)["error"].(map[string]any)
}

func (e *phaseEnv) method(key, method string) *testenv.Response {
	e.t.Helper()
	return e.c.Do(e.t, http.MethodPost, "/v1/namespaces/"+e.ns+"/memories/"+key+":"+method, nil)
}

func (e *phaseEnv) head(key string) (int, map[string]any) {
	e.t.Helper()
	r := e.c.Do(e.t, http.MethodGet, "/v1/namespaces/"+e.ns+"/memories/"+key, nil)
	if r.Status != http.StatusOK {
		return r.Status, nil
	}
	return r.Status, r.JSON(e.t)
}

// revisions counts the journal's revisions of a key, under every identity.
func (e *phaseEnv) revisions(key string) int64 {
	e.t.Helper()
	return testenv.Int(e.t, e.pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, $3))`,
		e.org, e.ns, key)
}

// events lists the event types on the topic for the namespace, in seq order, once a
// search has waited at the barrier for everything committed so far.
func (e *phaseEnv) events() []string {
	e.t.Helper()
	if r := e.c.Search(e.t, e.ns, "anything", 1); r.Status != http.StatusOK {
		e.t.Fatalf("search barrier: %d %s", r.Status, r.Body)
	}
	bySeq := map[int64]string{}
	var last int64
	for _, rec := range env.TopicRecords(e.t) {
		if string(rec.Key) != e.org+"/"+e.ns {
			continue
		}
		ev, err := events.Decode(rec.Value)
		if err != nil {
			e.t.Fatal(err)
		}
		bySeq[ev.Seq] = string(ev.Type)
		last = max(last, ev.Seq)
	}
	var out []string
	for s := int64(1); s <= last; s++ {
		out = append(out, bySeq[s])
	}
	return out
}

func (e *phaseEnv) hitKeys(query string) []string {
	e.t.Helper()
	var keys []string
	for _, h := range hits(e.t, e.c.Search(e.t, e.ns, query, 10)) {
		keys = append(keys, h["memory_key"].(string))
	}
	return keys
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func sameList(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// One case per phase of memory.set, in the order docs/architecture.md gives, each asserting the answer
// and what reached Postgres and the topic.
func TestMemorySetPhases(t *testing.T) {
	t.Run("1 type resolution names retyped_from", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, map[string]any{"types": map[string]any{"note": map[string]any{"retype": "fact"}}})
		a := e.ok("k", map[string]any{"value": "a note about the build", "memory_type": "note"})
		eq(t, "retyped_from", a["retyped_from"], any("note"))
		eq(t, "memory_type", a["memory_type"], any("fact"))
		_, h := e.head("k")
		eq(t, "stored type", h["memory_type"], any("fact"))
	})
	t.Run("3 restatement reinforces", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "the build runs nightly"})
		a := e.ok("k", map[string]any{"value": "the build runs nightly"})
		eq(t, "verdict", a["verdict"], any("restatement"))
		eq(t, "reinforcement", a["reinforcement_count"], any(1.0))
		eq(t, "revisions", e.revisions("k"), 2)
		if ev := e.events(); !sameList(ev, "memory.written", "memory.revised") {
			t.Fatalf("events %v", ev)
		}
	})
	t.Run("3 a locked key refuses a new value with 423", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "the budget is fixed"})
		if r := e.method("k", "lock"); r.Status != http.StatusOK {
			t.Fatalf("lock: %d %s", r.Status, r.Body)
		}
		err := e.refused("k", map[string]any{"value": "the budget doubled"}, http.StatusLocked, "MEMORY_LOCKED")
		eq(t, "refused_action", err["refused_action"], any("write"))
		// A restatement is no change, and is allowed.
		e.ok("k", map[string]any{"value": "the budget is fixed"})
		eq(t, "revisions", e.revisions("k"), 3)
		if ev := e.events(); !sameList(ev, "memory.written", "memory.status_changed", "memory.revised") {
			t.Fatalf("events %v", ev)
		}
	})
	t.Run("3 a pinned key refuses a new value unless the write pins too", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "release on thursday"})
		if r := e.method("k", "pin"); r.Status != http.StatusOK || r.JSON(t)["pinned"] != true {
			t.Fatalf("pin: %d %s", r.Status, r.Body)
		}
		e.refused("k", map[string]any{"value": "release on friday"}, http.StatusConflict, "PINNED_CONFLICT")
		eq(t, "revisions after refusal", e.revisions("k"), 2)
		a := e.ok("k", map[string]any{"value": "release on friday", "pin": true})
		eq(t, "pinned", a["pinned"], any(true))
		_, h := e.head("k")
		eq(t, "value", h["value"], any("release on friday"))
	})
	t.Run("4 expiry from ttl, type retention, valid_to", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, map[string]any{"types": map[string]any{"todo": map[string]any{"retention_days": 2, "on_expire": "demote"}}})
		before := time.Now()
		a := e.ok("ttl", map[string]any{"value": "call back", "ttl_seconds": 3600})
		at, _ := time.Parse(time.RFC3339Nano, a["expires_at"].(string))
		if at.Before(before.Add(59*time.Minute)) || at.After(time.Now().Add(61*time.Minute)) || a["on_expire"] != "tombstone" {
			t.Fatalf("ttl expiry: %v %v", a["expires_at"], a["on_expire"])
		}
		a = e.ok("todo", map[string]any{"value": "buy milk", "memory_type": "todo"})
		at, _ = time.Parse(time.RFC3339Nano, a["expires_at"].(string))
		if at.Before(before.Add(47*time.Hour)) || a["on_expire"] != "demote" {
			t.Fatalf("type retention: %v %v", a["expires_at"], a["on_expire"])
		}
		// A fact whose validity has passed is hidden by reads at once.
		e.ok("past", map[string]any{"value": "the promo ran in may", "valid_to": time.Now().Add(-time.Hour).Format(time.RFC3339)})
		if st, _ := e.head("past"); st != http.StatusNotFound {
			t.Fatalf("expired row served: %d", st)
		}
	})
	t.Run("4 a locked row's expiry cannot move", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "kept as is"})
		e.method("k", "lock")
		err := e.refused("k", map[string]any{"value": "kept as is", "ttl_seconds": 60}, http.StatusLocked, "MEMORY_LOCKED")
		eq(t, "refused_action", err["refused_action"], any("expire"))
	})
	t.Run("5 char limit of the type", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, map[string]any{"types": map[string]any{"title": map[string]any{"char_limit": 10}}})
		e.refused("k", map[string]any{"value": "a title far longer than ten", "memory_type": "title"}, http.StatusUnprocessableEntity, "CHAR_LIMIT_EXCEEDED")
		eq(t, "revisions", e.revisions("k"), 0)
	})
	t.Run("5 blacklist refuses, and its removal lets the value through", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		b := []byte(`{"pattern": "(?i)project\\s+falcon"}`)
		r := e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/blacklist", b)
		if r.Status != http.StatusOK {
			t.Fatalf("blacklist add: %d %s", r.Status, r.Body)
		}
		gen := r.JSON(t)["policy_generation"].(float64)
		e.refused("k", map[string]any{"value": "Project  Falcon ships in june"}, http.StatusUnprocessableEntity, "BLACKLISTED")
		eq(t, "revisions", e.revisions("k"), 0)
		r = e.c.Do(t, http.MethodDelete, "/v1/namespaces/"+e.ns+"/blacklist", b)
		if r.Status != http.StatusOK || r.JSON(t)["policy_generation"].(float64) <= gen {
			t.Fatalf("blacklist remove: %d %s (a change advances the policy generation)", r.Status, r.Body)
		}
		e.ok("k", map[string]any{"value": "Project  Falcon ships in june"})
		r = e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/blacklist", []byte(`{"pattern": "(unclosed"}`))
		if r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("an invalid RE2 pattern: %d %s", r.Status, r.Body)
		}
	})
	t.Run("5 sensitivity: detected secrets are high, a caller may raise not lower", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		a := e.ok("contact", map[string]any{"value": "reach the client at dana.smith@example.org", "sensitivity": "normal"})
		eq(t, "sensitivity", a["sensitivity"], any("high"))
		if a["expires_at"] == nil || len(a["advisories"].([]any)) == 0 {
			t.Fatalf("a high row keeps the sensitive retention and says its level was kept: %v", a)
		}
		a = e.ok("raised", map[string]any{"value": "the merger closes in q3", "sensitivity": "high"})
		eq(t, "raised", a["sensitivity"], any("high"))
		e.ok("plain", map[string]any{"value": "the client prefers email updates"})
		// High rows have no search document.
		keys := e.hitKeys("client email merger closes")
		if contains(keys, "contact") || contains(keys, "raised") || !contains(keys, "plain") {
			t.Fatalf("search served %v", keys)
		}
	})
	t.Run("6 a proposal never replaces an established fact", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "the office opens at 9"})
		e.refused("k", map[string]any{"value": "the office opens at 8", "proposed": true}, http.StatusConflict, "KEY_HOLDS_FACT")
		// Nor another user's.
		e.refused("k", map[string]any{"value": "the office opens at 8", "proposed": true, "user_id": "bob"}, http.StatusConflict, "KEY_HOLDS_FACT")
		a := e.ok("fresh", map[string]any{"value": "a new idea", "proposed": true})
		eq(t, "status", a["status"], any("proposed"))
	})
	t.Run("6 if_match_sha256 must match the live value", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		a := e.ok("k", map[string]any{"value": "v1"})
		e.refused("k", map[string]any{"value": "v2", "if_match_sha256": "0000000000000000000000000000000000000000000000000000000000000000"}, http.StatusConflict, "PRECONDITION_FAILED")
		e.ok("k", map[string]any{"value": "v2", "if_match_sha256": a["content_sha256"]})
		e.refused("k", map[string]any{"value": "v3", "if_match_sha256": a["content_sha256"]}, http.StatusConflict, "PRECONDITION_FAILED")
	})
	t.Run("7 provenance is stamped by the server; a request may only downgrade", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k", map[string]any{"value": "imported from the wiki", "source_class": "imported"})
		_, h := e.head("k")
		eq(t, "source_class", h["source_class"], any("imported"))
		if a, _ := h["actor"].(string); len(a) < 7 || a[:6] != "token:" {
			t.Fatalf("actor %v, want the token", h["actor"])
		}
		e.ok("d", map[string]any{"value": "said directly"})
		_, h = e.head("d")
		eq(t, "default source_class", h["source_class"], any("direct"))
		e.refused("x", map[string]any{"value": "x", "source_class": "verified"}, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	})
	t.Run("8 non-embedded types get no search document", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("ep", map[string]any{"value": "we talked about the quarterly roadmap", "memory_type": "episodic"})
		e.ok("fact", map[string]any{"value": "the quarterly roadmap is due in march"})
		keys := e.hitKeys("quarterly roadmap")
		if contains(keys, "ep") || !contains(keys, "fact") {
			t.Fatalf("search served %v", keys)
		}
		if st, _ := e.head("ep"); st != http.StatusOK {
			t.Fatal("a non-embedded row is still readable")
		}
	})
	t.Run("11 a dry run answers the verdict and writes nothing", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("a", map[string]any{"value": "the user lives in Lisbon"})
		a := e.ok("b", map[string]any{"value": "the user lives in Lisbon", "dry_run": true})
		eq(t, "verdict", a["verdict"], any("merge"))
		a = e.ok("c", map[string]any{"value": "the user lives in Porto", "dry_run": true})
		eq(t, "written", a["written"], any(false))
		eq(t, "version", a["version"], any(0.0))
		eq(t, "revisions", e.revisions("c"), 0)
		if ev := e.events(); !sameList(ev, "memory.written") {
			t.Fatalf("a dry run reached the topic: %v", ev)
		}
	})
}

// One case per verdict against peers.
func TestMemorySetVerdicts(t *testing.T) {
	t.Run("merge: the same value under another key writes nothing", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		first := e.ok("k1", map[string]any{"value": "the team ships on tuesdays"})
		a := e.ok("k2", map[string]any{"value": "the team ships on tuesdays"})
		eq(t, "verdict", a["verdict"], any("merge"))
		eq(t, "written", a["written"], any(false))
		eq(t, "merged into", a["merged_into"].(map[string]any)["memory_id"], first["memory_id"])
		eq(t, "revisions of k2", e.revisions("k2"), 0)
	})
	// The reported case: bob's write was answered merged into alice's row, then his
	// own key was 404. A verdict relates one subject's statements: his is written.
	t.Run("another user's same value is written, not merged into hers", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("alice-favorite-color", map[string]any{"value": "blue", "user_id": "alice"})
		a := e.ok("bob-favorite-color", map[string]any{"value": "blue", "user_id": "bob"})
		eq(t, "written", a["written"], any(true))
		r := e.c.Do(t, http.MethodGet, "/v1/namespaces/"+e.ns+"/memories/bob-favorite-color?user_id=bob", nil)
		if r.Status != http.StatusOK || r.JSON(t)["value"] != "blue" {
			t.Fatalf("bob reads his key: %d %s", r.Status, r.Body)
		}
	})
	t.Run("pinned peer refuses the write", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k1", map[string]any{"value": "the standup happens at nine every morning", "pin": true})
		err := e.refused("k2", map[string]any{"value": "the standup happens at ten every morning"}, http.StatusConflict, "PINNED_CONFLICT")
		if _, named := err["memory_id"]; named {
			t.Fatal("the refusal must not name the pinned row")
		}
		eq(t, "revisions of k2", e.revisions("k2"), 0)
	})
	t.Run("newest_wins: another object for the subject refines and retires the peer", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, map[string]any{"conflict_policy": "newest_wins"})
		old := e.ok("k1", map[string]any{"value": "the user lives in Lisbon"})
		a := e.ok("k2", map[string]any{"value": "the user lives in Berlin"})
		eq(t, "verdict", a["verdict"], any("refines"))
		if sup, _ := a["superseded"].([]any); len(sup) != 1 || sup[0] != old["memory_id"] {
			t.Fatalf("superseded %v", a["superseded"])
		}
		_, h := e.head("k1")
		eq(t, "peer status", h["status"], any("superseded"))
		eq(t, "superseded_by", h["superseded_by"], a["memory_id"])
		if keys := e.hitKeys("where does the user live"); contains(keys, "k1") || !contains(keys, "k2") {
			t.Fatalf("search after refines: %v", keys)
		}
		if keys := answerKeys(e.search(e.c, "where does the user live", client.SearchRequest{IncludeSuperseded: true})); !contains(keys, "k1") {
			t.Fatalf("include_superseded left out the retired row: %v", keys)
		}
		if ev := e.events(); !sameList(ev, "memory.written", "memory.written", "memory.status_changed") {
			t.Fatalf("events %v", ev)
		}
	})
	t.Run("newest_wins: a peer dated later is not retired, it conflicts", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, map[string]any{"conflict_policy": "newest_wins"})
		e.ok("k1", map[string]any{"value": "the user lives in Madrid", "valid_at": time.Now().Add(48 * time.Hour).Format(time.RFC3339)})
		a := e.ok("k2", map[string]any{"value": "the user lives in Berlin"})
		eq(t, "verdict", a["verdict"], any("conflict"))
	})
	t.Run("duplicate: a near-identical statement is kept, not served", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		first := e.ok("k1", map[string]any{"value": "the user prefers dark mode in the editor"})
		a := e.ok("k2", map[string]any{"value": "the user prefers the dark mode in the editor"})
		eq(t, "verdict", a["verdict"], any("duplicate"))
		eq(t, "duplicate_of", a["duplicate_of"], first["memory_id"])
		eq(t, "status", a["status"], any("duplicate"))
		if keys := e.hitKeys("dark mode editor"); contains(keys, "k2") || !contains(keys, "k1") {
			t.Fatalf("search served %v", keys)
		}
	})
	t.Run("conflict: both rows carry conflict_with", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		first := e.ok("k1", map[string]any{"value": "the user lives in Lisbon"})
		a := e.ok("k2", map[string]any{"value": "the user lives in Berlin"})
		eq(t, "verdict", a["verdict"], any("conflict"))
		if cw, _ := a["conflict_with"].([]any); len(cw) != 1 || cw[0] != first["memory_id"] {
			t.Fatalf("conflict_with %v", a["conflict_with"])
		}
		_, h := e.head("k1")
		eq(t, "peer status", h["status"], any("conflicted"))
		if cw, _ := h["conflict_with"].([]any); len(cw) != 1 || cw[0] != a["memory_id"] {
			t.Fatalf("peer conflict_with %v", h["conflict_with"])
		}
		peers := a["peers"].([]any)
		if len(peers) == 0 || peers[0].(map[string]any)["verdict"] != "conflict" || peers[0].(map[string]any)["cosine"].(float64) <= 0 {
			t.Fatalf("peers judged: %v", peers)
		}
		// Both are still served, flagged.
		if keys := e.hitKeys("where does the user live"); !contains(keys, "k1") || !contains(keys, "k2") {
			t.Fatalf("search after conflict: %v", keys)
		}
		if ev := e.events(); !sameList(ev, "memory.written", "memory.written", "memory.status_changed") {
			t.Fatalf("events %v", ev)
		}
	})
	// memory.restore brings a conflicted row back conflicted only while its peer still
	// is, listing it; once the peer is gone, it comes back active without the link.
	t.Run("a restore requalifies a conflicted row against its peer", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("k1", map[string]any{"value": "the user lives in Lisbon"})
		e.ok("k2", map[string]any{"value": "the user lives in Berlin"})
		restore := func(want string, links int) {
			t.Helper()
			if r := e.c.Do(t, http.MethodDelete, "/v1/namespaces/"+e.ns+"/memories/k2", nil); r.Status != http.StatusOK {
				t.Fatalf("delete k2: %d %s", r.Status, r.Body)
			}
			if r := e.method("k2", "restore"); r.Status != http.StatusOK {
				t.Fatalf("restore k2: %d %s", r.Status, r.Body)
			}
			_, h := e.head("k2")
			if cw, _ := h["conflict_with"].([]any); h["status"] != want || len(cw) != links {
				t.Fatalf("k2 restored as %v with conflict_with %v, want %s with %d", h["status"], h["conflict_with"], want, links)
			}
		}
		if _, h := e.head("k1"); h["status"] != "conflicted" {
			t.Fatalf("k1: %v", h)
		}
		restore("conflicted", 1)
		if r := e.c.Do(t, http.MethodDelete, "/v1/namespaces/"+e.ns+"/memories/k1", nil); r.Status != http.StatusOK {
			t.Fatalf("delete k1: %d %s", r.Status, r.Body)
		}
		restore("active", 0)
	})
	t.Run("a decision is identified by its key: the same text under another key conflicts", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		e.ok("db", map[string]any{"value": "we store sessions in postgres", "memory_type": "decision", "pin": true})
		a := e.ok("cache", map[string]any{"value": "we store sessions in postgres", "memory_type": "decision"})
		eq(t, "verdict", a["verdict"], any("conflict"))
	})
	t.Run("append_only judges nothing", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only"})
		e.ok("k1", map[string]any{"value": "the team ships on tuesdays"})
		a := e.ok("k2", map[string]any{"value": "the team ships on tuesdays"})
		eq(t, "verdict", a["verdict"], any("new"))
		eq(t, "written", a["written"], any(true))
	})
	t.Run("a user-bound token's peers are its own user's rows, but a pin holds namespace-wide", func(t *testing.T) {
		t.Parallel()
		e := newPhaseEnv(t, nil)
		n, url := env.API(t, func(c *config.Config) { c.Command.ConflictThreshold, c.Command.DuplicateThreshold = 0.5, 0.8 })
		bob := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleWriter, ReadUserID: "bob"}))
		e.ok("alice-city", map[string]any{"value": "the user lives in Lisbon", "user_id": "alice"})
		e.ok("alice-pin", map[string]any{"value": "the office is closed on fridays", "user_id": "alice", "pin": true})
		b, _ := json.Marshal(map[string]any{"value": "the user lives in Lisbon"})
		r := bob.Do(t, http.MethodPut, "/v1/namespaces/"+e.ns+"/memories/bob-city", b)
		if r.Status != http.StatusOK || r.JSON(t)["verdict"] != "new" {
			t.Fatalf("bob's write judged against alice's row: %d %s", r.Status, r.Body)
		}
		b, _ = json.Marshal(map[string]any{"value": "the office is closed on fridays and mondays"})
		if r := bob.Do(t, http.MethodPut, "/v1/namespaces/"+e.ns+"/memories/bob-office", b); r.Status != http.StatusConflict || r.ErrorCode() != "PINNED_CONFLICT" {
			t.Fatalf("a pinned peer of another user must still refuse: %d %s", r.Status, r.Body)
		}
	})
}

// Phase 13: the same key in another session of the same subject.
func TestSameKeyInAnotherSession(t *testing.T) {
	t.Run("newest_wins retires the other session's row", func(t *testing.T) {
		e := newPhaseEnv(t, map[string]any{"conflict_policy": "newest_wins"})
		old := e.ok("plan", map[string]any{"value": "deploy on monday", "session_id": "s1"})
		a := e.ok("plan", map[string]any{"value": "deploy on wednesday", "session_id": "s2"})
		if sup, _ := a["superseded"].([]any); len(sup) != 1 || sup[0] != old["memory_id"] {
			t.Fatalf("superseded %v", a["superseded"])
		}
		r := e.c.Do(t, http.MethodGet, "/v1/namespaces/"+e.ns+"/memories/plan?session_id=s1", nil)
		if r.Status != http.StatusOK || r.JSON(t)["status"] != "superseded" {
			t.Fatalf("s1's row: %d %s", r.Status, r.Body)
		}
	})
	// The seeds' rule: a named user's row is marked owed when another session of that
	// user holds its key; the anonymous user's never is, since its sessions are
	// separate tasks. (This test asserted the opposite for "-" before.)
	t.Run("auto_reinforce only marks a named user's new row for judgement", func(t *testing.T) {
		e := newPhaseEnv(t, nil)
		for _, user := range []string{"alice", "-"} {
			e.ok("plan-"+user, map[string]any{"value": "deploy on monday", "session_id": "s1", "user_id": user})
			e.ok("plan-"+user, map[string]any{"value": "deploy on wednesday", "session_id": "s2", "user_id": user})
			r := e.c.Do(t, http.MethodGet, "/v1/namespaces/"+e.ns+"/memories/plan-"+user+"?session_id=s1&user_id="+user, nil)
			if r.Status != http.StatusOK || r.JSON(t)["status"] != "active" {
				t.Fatalf("%s's s1 row: %d %s", user, r.Status, r.Body)
			}
		}
		owed := func(user string) int64 {
			return testenv.Int(t, e.pool, `SELECT count(*) FROM loom.memory_current WHERE org = $1 AND namespace = $2
				AND user_id = loom.user_ref($1, $3) AND session_id = loom.session_ref($1, 's2') AND (row->>'judgement_owed')::bool`, e.org, e.ns, user)
		}
		eq(t, "alice's rows owed a judgement", owed("alice"), 1)
		eq(t, "the anonymous user's rows owed a judgement", owed("-"), 0)
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
