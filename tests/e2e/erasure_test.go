package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/tests/testenv"
)

// erasureWorld is one org's memories for an erasure test: alice's and bob's, in three
// namespaces, each value, key and tag holding a word no other memory holds.
type erasureWorld struct {
	org    string
	admin  *testenv.Client
	pool   *pgxpool.Pool
	conn   *ch.Conn
	spaces []string
	// words[user][i] is the word of the user's memories in spaces[i].
	words map[string][]string
	// idemKey is the Idempotency-Key of a write of alice's in spaces[0].
	idemKey, idemPath string
	idemBody          map[string]any
}

const alice, bob = "alice", "bob"

func passportKey(user, word string) string { return user + "-passport-" + word }

func newErasureWorld(t *testing.T) *erasureWorld {
	t.Helper()
	n, url := env.SharedAPI(t)
	org := testenv.Unique(t, "org")
	w := &erasureWorld{org: org, admin: testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org})),
		pool: env.PG(t), conn: env.CH(t), words: map[string][]string{}}
	for i := 0; i < 3; i++ {
		w.spaces = append(w.spaces, testenv.Unique(t, fmt.Sprintf("er%d", i)))
	}
	w.admin.AppendOnly(t, w.spaces...)
	stamp := time.Now().UnixNano() % 1_000_000
	for i, ns := range w.spaces {
		for _, user := range []string{alice, bob} {
			word := fmt.Sprintf("%sword%d%06d", user[:1], i, stamp)
			w.words[user] = append(w.words[user], word)
			key := passportKey(user, word)
			for _, v := range []string{"keeps the %s passport in the blue drawer", "moved the %s passport to the red drawer"} {
				w.put(t, ns, key, map[string]any{"value": user + " " + fmt.Sprintf(v, word), "user_id": user, "tags": []string{"tag-" + word}})
			}
			diary := user + "-diary-" + word
			w.put(t, ns, diary, map[string]any{"value": user + " wrote about " + word + " in the diary", "user_id": user})
			if r := w.admin.Do(t, http.MethodDelete, "/v1/namespaces/"+ns+"/memories/"+diary+"?user_id="+user, nil); r.Status != http.StatusOK {
				t.Fatalf("delete %s: %d %s", diary, r.Status, r.Body)
			}
		}
	}
	w.idemKey = "erasure-" + w.words[alice][0]
	w.idemPath = "/v1/namespaces/" + w.spaces[0] + "/memories/" + alice + "-keyed-" + w.words[alice][0]
	w.idemBody = map[string]any{"value": "alice keyed " + w.words[alice][0], "user_id": alice}
	if r := keyed(t, w.admin, http.MethodPut, w.idemPath, w.idemKey, w.idemBody); r.Status != http.StatusOK {
		t.Fatalf("keyed write: %d %s", r.Status, r.Body)
	}
	for i, ns := range w.spaces {
		for _, user := range []string{alice, bob} {
			if !w.found(t, ns, user, i) {
				t.Fatalf("before the erasure, %s's memory in %s is not searchable", user, ns)
			}
		}
	}
	return w
}

func (w *erasureWorld) put(t *testing.T, ns, key string, body map[string]any) {
	t.Helper()
	if r := w.admin.Put(t, ns, key, body); r.Status != http.StatusOK {
		t.Fatalf("set %s/%s: %d %s", ns, key, r.Status, r.Body)
	}
}

// found reports whether a search of spaces[i] serves the user's passport memory.
func (w *erasureWorld) found(t *testing.T, ns, user string, i int) bool {
	t.Helper()
	word := w.words[user][i]
	for _, h := range hits(t, w.admin.Search(t, ns, word+" passport red drawer", 10)) {
		if h["memory_key"] == passportKey(user, word) {
			return true
		}
	}
	return false
}

// erased checks that nothing of a scope (a user in a namespace, or the whole
// namespace when user is empty) is left anywhere a reader or the topic could reach.
func (w *erasureWorld) erased(t *testing.T, view map[string]any, i int, user string) {
	t.Helper()
	ns := w.spaces[i]
	pool, conn := w.pool, w.conn
	if _, ok := view["fences"].(map[string]any)[ns]; !ok {
		t.Fatalf("the erasure has no fence in %s: %v", ns, view["fences"])
	}
	for table, n := range testenv.ScopeRows(t, pool, conn, w.org, ns, user, 0) {
		if n != 0 {
			t.Errorf("%s still holds %d rows of the erased scope in %s", table, n, ns)
		}
	}
	users := []string{user}
	if user == "" {
		users = []string{alice, bob}
	}
	for _, u := range users {
		for table, n := range testenv.TextRows(t, conn, w.org, ns, w.words[u][i]) {
			if n != 0 {
				t.Errorf("%s: %d rows still hold %s's erased text in %s", table, n, u, ns)
			}
		}
		if w.found(t, ns, u, i) {
			t.Errorf("search still serves %s's erased memory in %s", u, ns)
		}
		key := url.PathEscape(passportKey(u, w.words[u][i]))
		if r := w.admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/"+key+"?user_id="+u, nil); r.Status != http.StatusNotFound {
			t.Errorf("get %s's erased memory: %d %s", u, r.Status, r.Body)
		}
	}
	// The scope's records are still on the topic, and no data key opens them.
	var seqs []int64
	var ref string
	if user != "" {
		ref = testenv.UserRef(t, pool, w.org, user)
	}
	for _, r := range env.NamespaceRecords(t, w.org, ns) {
		e, err := events.Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if e.Revision != nil && (user == "" || e.Revision.UserRef == ref) {
			seqs = append(seqs, e.Seq)
		}
	}
	if len(seqs) == 0 {
		t.Fatalf("the topic holds no record of the erased scope in %s", ns)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.revision_keys WHERE org = $1 AND namespace = $2 AND seq = ANY($3)`,
		w.org, ns, seqs); n != 0 {
		t.Errorf("%d data keys still open the erased scope's records in %s", n, ns)
	}
}

// kept checks that a user's memories outside the scope are untouched.
func (w *erasureWorld) kept(t *testing.T, i int, user string) {
	t.Helper()
	if !w.found(t, w.spaces[i], user, i) {
		t.Errorf("search no longer serves %s's memory in %s, outside the erasure", user, w.spaces[i])
	}
	rows := testenv.ScopeRows(t, w.pool, w.conn, w.org, w.spaces[i], user, 0)
	for _, table := range []string{"pg:memory_current", "pg:memory_revisions", "ch:memory", "ch:memory_versions", "ch:memory_embeddings", "ch:audit_log"} {
		if rows[table] == 0 {
			t.Errorf("%s lost %s's rows in %s, outside the erasure", table, user, w.spaces[i])
		}
	}
}

// noPlaintext checks that no word, key or tag written in the world is anywhere on
// the topic: content travels sealed.
func (w *erasureWorld) noPlaintext(t *testing.T) {
	t.Helper()
	var needles []string
	for _, user := range []string{alice, bob} {
		for _, word := range w.words[user] {
			needles = append(needles, word, "tag-"+word, passportKey(user, word))
		}
	}
	if leaks := testenv.Leaks(env.TopicRecords(t), needles...); len(leaks) > 0 {
		t.Fatalf("plaintext on the topic: %v", leaks)
	}
}

// completed checks the saga's own account: every step done, a census of every
// counted table of both stores, all zero.
func completed(t *testing.T, view map[string]any) {
	t.Helper()
	if view["residue_count"] != float64(0) || len(view["residue"].(map[string]any)) != 0 {
		t.Fatalf("the erasure left residue: %v", view)
	}
	census := view["census"].(map[string]any)
	for _, tb := range erasure.Tables() {
		if tb.Class != erasure.Counted {
			continue
		}
		if n, ok := census[tb.Key()]; !ok || n != float64(0) {
			t.Errorf("census of %s: %v (present %t)", tb.Key(), n, ok)
		}
	}
	for _, s := range view["steps"].([]any) {
		if s.(map[string]any)["completed_at"] == nil {
			t.Errorf("step %v not completed", s)
		}
	}
}

func TestErasureOfAUserInANamespace(t *testing.T) {
	w := newErasureWorld(t)
	view := w.admin.Erase(t, map[string]any{"user_id": alice, "namespace": w.spaces[0]})
	completed(t, view)
	if sc := view["scope"].(map[string]any); sc["kind"] != "user_in_namespace" || sc["namespace"] != w.spaces[0] {
		t.Fatalf("scope %v", sc)
	}
	w.erased(t, view, 0, alice)
	w.kept(t, 0, bob)
	w.kept(t, 1, alice)
	// The audit trail outlives the memory, without its keys and without naming alice.
	if n := testenv.Int(t, w.pool, `SELECT count(*) FROM loom.erased_memories WHERE org = $1 AND namespace = $2`, w.org, w.spaces[0]); n != 3 {
		t.Fatalf("deletion evidence for %d memories, want 3 (passport, diary, keyed)", n)
	}
	var audits, named uint64
	if err := w.conn.QueryRow(context.Background(), `SELECT countIf(user_id = '' AND memory_key = '' AND content_sha256 = ''), countIf(user_id = ?)
		FROM loom.audit_log WHERE org = ? AND namespace = ?`, alice, w.org, w.spaces[0]).Scan(&audits, &named); err != nil || audits == 0 || named != 0 {
		t.Fatalf("alice's audit rows: %d scrubbed, %d naming her, %v; want them kept, scrubbed", audits, named, err)
	}
	// The Idempotency-Key of a request whose memory was erased answers 404 for it.
	if r := keyed(t, w.admin, http.MethodPut, w.idemPath, w.idemKey, w.idemBody); r.Status != http.StatusNotFound || r.ErrorCode() != "RESOURCE_NOT_FOUND" {
		t.Fatalf("replay of an erased request: %d %s", r.Status, r.Body)
	}
	w.noPlaintext(t)
}

func TestErasureOfAUserInTheOrg(t *testing.T) {
	w := newErasureWorld(t)
	view := w.admin.Erase(t, map[string]any{"user_id": alice, "purge": true})
	completed(t, view)
	for i := range w.spaces {
		w.erased(t, view, i, alice)
		w.kept(t, i, bob)
	}
	// A purge deletes the scope's audit trail too.
	var audits uint64
	if err := w.conn.QueryRow(context.Background(), `SELECT count() FROM loom.audit_log WHERE org = ? AND user_id = ?`,
		w.org, alice).Scan(&audits); err != nil || audits != 0 {
		t.Fatalf("alice's audit rows after a purge: %d, %v", audits, err)
	}
	w.noPlaintext(t)
}

func TestErasureOfANamespace(t *testing.T) {
	w := newErasureWorld(t)
	view := w.admin.Erase(t, map[string]any{"namespace": w.spaces[1]})
	completed(t, view)
	w.erased(t, view, 1, "")
	for _, i := range []int{0, 2} {
		w.kept(t, i, alice)
		w.kept(t, i, bob)
	}
	// The namespace goes on: a fresh write is served.
	w.put(t, w.spaces[1], "after", map[string]any{"value": "a fresh fact about otters"})
	if got := hits(t, w.admin.Search(t, w.spaces[1], "fresh fact about otters", 3)); len(got) == 0 || got[0]["memory_key"] != "after" {
		t.Fatalf("a write after the erasure is not served: %v", got)
	}
	w.noPlaintext(t)
}

func TestErasureOfANamespaceList(t *testing.T) {
	w := newErasureWorld(t)
	view := w.admin.Erase(t, map[string]any{"namespaces": []string{w.spaces[2], w.spaces[0]}})
	completed(t, view)
	w.erased(t, view, 0, "")
	w.erased(t, view, 2, "")
	w.kept(t, 1, alice)
	w.kept(t, 1, bob)
	if r := keyed(t, w.admin, http.MethodPut, w.idemPath, w.idemKey, w.idemBody); r.Status != http.StatusNotFound {
		t.Fatalf("replay of an erased request: %d %s", r.Status, r.Body)
	}
	w.noPlaintext(t)
}

// Erasures are for admin tokens, and name exactly one scope the token reaches.
func TestErasureRequestIsChecked(t *testing.T) {
	n, url := env.SharedAPI(t)
	org := testenv.Unique(t, "org")
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	writer := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter}))
	bound := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Namespaces: []string{"one"}}))
	for _, c := range []struct {
		who        *testenv.Client
		body       string
		status     int
		code, path string
	}{
		{writer, `{"namespace": "one"}`, http.StatusForbidden, "PERMISSION_DENIED", ""},
		{admin, `{}`, http.StatusUnprocessableEntity, "VALIDATION_FAILED", ""},
		{admin, `{"namespace": "one", "namespaces": ["two"]}`, http.StatusUnprocessableEntity, "VALIDATION_FAILED", ""},
		{admin, `{"user_id": "u", "namespaces": ["two"]}`, http.StatusUnprocessableEntity, "VALIDATION_FAILED", ""},
		{admin, `{"user_id": "-"}`, http.StatusUnprocessableEntity, "VALIDATION_FAILED", ""},
		{admin, `{"namespace": "a/b"}`, http.StatusUnprocessableEntity, "VALIDATION_FAILED", ""},
		{bound, `{"user_id": "u"}`, http.StatusForbidden, "PERMISSION_DENIED", ""},
		{bound, `{"namespace": "two"}`, http.StatusNotFound, "RESOURCE_NOT_FOUND", ""},
		{admin, "", http.StatusNotFound, "RESOURCE_NOT_FOUND", "/v1/erasures/4f1c2a9e-0d3b-4c57-8e2a-6b9d1f3e5a70"},
		{writer, "", http.StatusForbidden, "PERMISSION_DENIED", "/v1/erasures/4f1c2a9e-0d3b-4c57-8e2a-6b9d1f3e5a70"},
	} {
		var r *testenv.Response
		if c.path != "" {
			r = c.who.Do(t, http.MethodGet, c.path, nil)
		} else {
			r = c.who.Do(t, http.MethodPost, "/v1/erasures", []byte(c.body))
		}
		if r.Status != c.status || r.ErrorCode() != c.code {
			t.Errorf("%s %s: %d %s, want %d %s", c.path, c.body, r.Status, r.Body, c.status, c.code)
		}
	}
	// A namespace never written has nothing to erase: the saga completes with no fence.
	view := admin.Erase(t, map[string]any{"namespace": testenv.Unique(t, "never")})
	if len(view["fences"].(map[string]any)) != 0 || view["status"] != "completed" {
		t.Fatalf("erasure of an empty namespace: %v", view)
	}
	// Another org's erasure is not found.
	other := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org + "-other"}))
	if r := other.Do(t, http.MethodGet, "/v1/erasures/"+view["id"].(string), nil); r.Status != http.StatusNotFound {
		t.Fatalf("another org's erasure: %d %s", r.Status, r.Body)
	}
}

// A write built from a head read before an erasure (a revision, a pin) is refused at
// its commit with 404: it cannot bring the erased memory back. A fresh write after the
// erasure commits as a new memory.
func TestWritesBuiltBeforeAnErasureAreRefused(t *testing.T) {
	held := make(chan struct{}, 2)
	release := make(chan struct{})
	var hold atomic.Bool
	_, c, org := env.OrgAPI(t, nil, app.WithCommandFaults(command.Faults{BeforeCommit: func() {
		if hold.Load() {
			held <- struct{}{}
			<-release
		}
	}}))
	ns := testenv.Unique(t, "stale")
	c.AppendOnly(t, ns)
	first := c.Put(t, ns, "k", map[string]any{"value": "the first value", "user_id": alice}).JSON(t)
	hold.Store(true)
	answers := make(chan *testenv.Response, 2)
	go func() {
		answers <- c.Put(t, ns, "k", map[string]any{"value": "a revision over the read head", "user_id": alice})
	}()
	go func() {
		answers <- c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories/k:pin", []byte(`{"user_id": "alice"}`))
	}()
	<-held
	<-held
	hold.Store(false)
	c.Erase(t, map[string]any{"user_id": alice, "namespace": ns})
	close(release)
	for i := 0; i < 2; i++ {
		r := <-answers
		if r.Status != http.StatusNotFound || r.ErrorCode() != "RESOURCE_NOT_FOUND" {
			t.Fatalf("a write built before the erasure: %d %s", r.Status, r.Body)
		}
	}
	fresh := c.Put(t, ns, "k", map[string]any{"value": "a value written after the erasure", "user_id": alice})
	if fresh.Status != http.StatusOK || fresh.JSON(t)["memory_id"] == first["memory_id"] {
		t.Fatalf("a fresh write after the erasure: %d %s", fresh.Status, fresh.Body)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2`, org, ns); n != 1 {
		t.Fatalf("%d revisions after the erasure, want the fresh one", n)
	}
}

// Writers keep writing a user's keys while the erasure runs: afterwards every row of
// the scope, in both stores, was written after the erasure's fence, and none carries a
// memory the erasure removed.
func TestErasureRaceWithWriters(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "race")
	c.AppendOnly(t, ns)
	pool, conn := env.PG(t), env.CH(t)
	stop := make(chan struct{})
	outcomes := make(chan map[int]int, 4)
	var writers sync.WaitGroup
	stopWriters := sync.OnceFunc(func() { close(stop); writers.Wait() })
	t.Cleanup(stopWriters)
	for wr := 0; wr < 4; wr++ {
		writers.Add(1)
		go func() {
			defer writers.Done()
			seen := map[int]int{}
			defer func() { outcomes <- seen }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				path := fmt.Sprintf("/v1/namespaces/%s/memories/k%d", ns, (wr+i)%3)
				var status int
				var err error
				if i%4 == 3 {
					// A copy writer: a verify is a new version over the head it read.
					status, err = c.Try(http.MethodPost, path+":verify", map[string]any{"user_id": alice})
				} else {
					status, err = c.Try(http.MethodPut, path, map[string]any{"value": fmt.Sprintf("writer %d wrote value %d", wr, i), "user_id": alice})
				}
				if err != nil {
					status = -1
				}
				seen[status]++
			}
		}()
	}
	testenv.Eventually(t, 30*time.Second, "the writers to write", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2`, org, ns) >= 20
	})
	view := c.Erase(t, map[string]any{"user_id": alice, "namespace": ns})
	fence := int64(view["fences"].(map[string]any)[ns].(float64))
	testenv.Eventually(t, 30*time.Second, "writes after the fence", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND seq > $3`, org, ns, fence) >= 10
	})
	stopWriters()
	total := map[int]int{}
	for i := 0; i < 4; i++ {
		for status, k := range <-outcomes {
			total[status] += k
		}
	}
	for status := range total {
		// 404: built over a head the erasure removed; 503: a head that moved under a
		// verify, or a write that kept meeting moved heads.
		if status != http.StatusOK && status != http.StatusNotFound && status != http.StatusServiceUnavailable {
			t.Fatalf("writers' answers: %v", total)
		}
	}
	t.Logf("writers' answers: %v; fence %d", total, fence)
	completed(t, view)
	hits(t, c.Search(t, ns, "writer wrote value", 3))
	testenv.WaitProjected(t, pool, "main", org, ns) // ClickHouse holds every commit
	for table, n := range testenv.ScopeRows(t, pool, conn, org, ns, alice, fence-1) {
		if n != 0 {
			t.Errorf("%s holds %d rows of alice's from before the fence %d", table, n, fence)
		}
	}
	after := testenv.ScopeRows(t, pool, conn, org, ns, alice, 0)
	if after["pg:memory_current"] == 0 || after["ch:memory_versions"] == 0 {
		t.Fatalf("no row written after the fence survived: %v", after)
	}
	erasedIDs := `SELECT memory_id FROM loom.erased_memories WHERE org = $1 AND namespace = $2`
	for _, table := range []string{"memory_current", "memory_revisions"} {
		if n := testenv.Int(t, pool, fmt.Sprintf(`SELECT count(*) FROM loom.%s WHERE org = $1 AND namespace = $2 AND memory_id IN (%s)`,
			table, erasedIDs), org, ns); n != 0 {
			t.Errorf("%s holds %d rows of an erased memory", table, n)
		}
	}
	ids := testenv.PGStrings(t, pool, `SELECT memory_id::text FROM loom.erased_memories WHERE org = $1 AND namespace = $2`, org, ns)
	var resurrected uint64
	if err := conn.QueryRow(context.Background(), `SELECT count() FROM loom.memory_versions WHERE org = ? AND namespace = ? AND has(?, toString(memory_id))`,
		org, ns, ids).Scan(&resurrected); err != nil || resurrected != 0 {
		t.Fatalf("ClickHouse history holds %d rows of an erased memory (%v)", resurrected, err)
	}
}

// memory.redact scrubs a version and the later versions that copy its text, destroys
// their keys, and leaves the rest; it refuses the live head's text; search never
// serves the redacted text; a retry covers the same versions again.
func TestRedactScrubsAVersionAndItsCopies(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "redact")
	c.AppendOnly(t, ns)
	word := fmt.Sprintf("wombat%06d", time.Now().UnixNano()%1_000_000)
	secret := "the vault code is " + word
	v1 := c.Put(t, ns, "vault", map[string]any{"value": secret, "tags": []string{"tag-" + word}}).JSON(t)
	v2 := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories/vault:pin", nil).JSON(t)
	v3 := c.Put(t, ns, "vault", map[string]any{"value": "the vault code was changed", "pin": true, "tags": []string{}}).JSON(t)
	// The versions are in ClickHouse before they are redacted: the projector scrubs them there.
	hits(t, c.Search(t, ns, "vault code", 1))
	testenv.WaitProjected(t, env.PG(t), "main", org, ns)
	redact := func(key string, version any) *testenv.Response {
		return c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories/"+key+":redact", []byte(fmt.Sprintf(`{"version": %q}`, version)))
	}
	if r := redact("vault", v3["version_text"]); r.Status != http.StatusConflict || r.ErrorCode() != "PRECONDITION_FAILED" {
		t.Fatalf("redact the live head: %d %s", r.Status, r.Body)
	}
	if r := redact("vault", "12345"); r.Status != http.StatusNotFound {
		t.Fatalf("redact a version the key never had: %d %s", r.Status, r.Body)
	}
	r := redact("vault", v1["version_text"])
	if r.Status != http.StatusOK {
		t.Fatalf("redact: %d %s", r.Status, r.Body)
	}
	got := r.JSON(t)["redacted_versions"].([]any)
	if len(got) != 2 || got[0] != v1["version_text"] || got[1] != v2["version_text"] {
		t.Fatalf("redacted %v, want the version and its pinned copy (%v, %v)", got, v1["version_text"], v2["version_text"])
	}
	// A key whose only text is its live head: delete it first, then redact.
	c.Put(t, ns, "locker", map[string]any{"value": "the locker holds " + word + " too"})
	locker := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/locker", nil).JSON(t)
	if r := redact("locker", locker["version_text"]); r.Status != http.StatusConflict {
		t.Fatalf("redact a live head: %d %s", r.Status, r.Body)
	}
	c.Do(t, http.MethodDelete, "/v1/namespaces/"+ns+"/memories/locker", nil)
	hits(t, c.Search(t, ns, "locker", 1))
	if r := redact("locker", locker["version_text"]); r.Status != http.StatusOK || len(r.JSON(t)["redacted_versions"].([]any)) != 2 {
		t.Fatalf("redact a deleted key's version: %d %s", r.Status, r.Body)
	}
	if r := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories/locker:restore", nil); r.Status != http.StatusOK ||
		r.JSON(t)["redacted"] != true || r.JSON(t)["written"] != false {
		t.Fatalf("restore of a redacted key: %d %s", r.Status, r.Body)
	}

	// History answers the scrubbed versions as redacted, the later one as written.
	h := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/vault/history", nil).JSON(t)
	for i, v := range h["versions"].([]any) {
		m := v.(map[string]any)
		redacted := i < 2
		if (m["redacted"] == true) != redacted || (m["value"] == nil) != redacted || (redacted && len(m["tags"].([]any)) != 0) {
			t.Fatalf("history version %d: %v", i, m)
		}
	}
	for _, h := range hits(t, c.Search(t, ns, secret, 5)) {
		if strings.Contains(fmt.Sprint(h), word) {
			t.Fatalf("search serves the redacted text: %v", h)
		}
	}
	// History reads the journal and waits for nothing: the projector has scrubbed
	// ClickHouse once the projection covers the redactions.
	testenv.WaitProjected(t, env.PG(t), "main", org, ns)
	redactedEverywhere(t, org, ns, word)
	noPlainHashOfRedactedText(t, org, ns, secret)
	// A retry covers the same versions again, and commits another record.
	if r := redact("vault", v1["version_text"]); r.Status != http.StatusOK || len(r.JSON(t)["redacted_versions"].([]any)) != 2 {
		t.Fatalf("retry: %d %s", r.Status, r.Body)
	}
	hits(t, c.Search(t, ns, "vault", 1)) // the barrier: the retry's record is projected, so published
	redacted := 0
	for _, rec := range env.NamespaceRecords(t, org, ns) {
		e, _ := events.Decode(rec.Value)
		if e.Type == events.TypeRedacted {
			if e.Redaction == nil || len(e.Redaction.Versions) == 0 || e.Revision.Op != "memory.redact" {
				t.Fatalf("a memory.redacted record without its versions: %s", rec.Value)
			}
			redacted++
		}
	}
	if redacted != 3 {
		t.Fatalf("%d memory.redacted records on the topic, want 3", redacted)
	}
	if leaks := testenv.Leaks(env.TopicRecords(t), word); len(leaks) > 0 {
		t.Fatalf("plaintext on the topic: %v", leaks)
	}
}

// redactedEverywhere checks that no store a reader reaches holds the word: the
// journal's versions are scrubbed and their keys gone, ClickHouse's history, search
// documents, terms and windows hold nothing of it.
func redactedEverywhere(t *testing.T, org, ns, word string) {
	t.Helper()
	pool, conn := env.PG(t), env.CH(t)
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND loom.opened_row(row, sealed, org, namespace, seq)::text LIKE '%' || $3 || '%'`,
		org, ns, word); n != 0 {
		t.Errorf("%d journal rows still hold the redacted text", n)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_current WHERE org = $1 AND namespace = $2 AND loom.opened_row(row, sealed, org, namespace, seq)::text LIKE '%' || $3 || '%'`,
		org, ns, word); n != 0 {
		t.Errorf("%d heads still hold the redacted text", n)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.revision_keys k JOIN loom.memory_revisions r USING (org, namespace, seq)
		WHERE org = $1 AND namespace = $2 AND r.redacted_at IS NOT NULL`, org, ns); n != 0 {
		t.Errorf("%d redacted revisions still have a data key", n)
	}
	for table, n := range testenv.TextRows(t, conn, org, ns, word) {
		if n != 0 {
			t.Errorf("%s: %d rows still hold the redacted text", table, n)
		}
	}
}

// noPlainHashOfRedactedText checks that no ClickHouse row of the namespace keeps the
// plain SHA-256 of a redacted value: it would confirm a guess of the text.
func noPlainHashOfRedactedText(t *testing.T, org, ns, value string) {
	t.Helper()
	quoted, _ := json.Marshal(value)
	canonical, err := memrow.Canonical("value", quoted)
	if err != nil {
		t.Fatal(err)
	}
	sha := memrow.ContentSHA256(canonical)
	conn := env.CH(t)
	for _, table := range []string{"memory", "memory_versions", "memory_embeddings", "memory_lexical", "memory_chunks"} {
		var n uint64
		if err := conn.QueryRow(context.Background(), "SELECT count() FROM loom."+table+" WHERE org = ? AND namespace = ? AND content_sha256 = ?",
			org, ns, sha).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s: %d rows keep the redacted value's plain SHA-256", table, n)
		}
	}
}
