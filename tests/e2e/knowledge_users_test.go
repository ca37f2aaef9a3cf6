package e2e

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	kindex "github.com/loomplane/loom/knowledge/index"
	"github.com/loomplane/loom/tests/testenv"
)

// Documents written for a user (the request's user_id, or a token bound to a user):
// a user's reads see the namespace's documents and the user's own, never another
// user's; a user's erasure takes the user's documents, chunks, jobs and catalog rows
// from every store, and leaves the namespace's and the other users'.

// kwrite sends a document write as c and answers the response, whatever its status.
func kwrite(t *testing.T, c *testenv.Client, method, ns string, doc map[string]any) *testenv.Response {
	t.Helper()
	return c.Do(t, method, kpath(ns, ""), kjson(t, doc))
}

// klist answers knowledge.list's source URIs, in order.
func klist(t *testing.T, c *testenv.Client, ns, query string) []string {
	t.Helper()
	r := c.Do(t, http.MethodGet, kpath(ns, query), nil)
	if r.Status != http.StatusOK {
		t.Fatalf("knowledge.list%s: %d %s", query, r.Status, r.Body)
	}
	var out []string
	for _, d := range r.JSON(t)["documents"].([]any) {
		out = append(out, d.(map[string]any)["source_uri"].(string))
	}
	return out
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func boundClient(t *testing.T, n *app.Process, url, org, user string) *testenv.Client {
	t.Helper()
	return testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter, ReadUserID: user}))
}

func TestKnowledgeUserBoundTokensReadTheirUsersDocuments(t *testing.T) {
	n, url := env.SharedAPI(t)
	org := testenv.Unique(t, "org")
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	alice, bob := boundClient(t, n, url, org, "alice"), boundClient(t, n, url, org, "bob")
	ns := testenv.Unique(t, "ku")
	kadd(t, admin, ns, map[string]any{"source_uri": "handbook.txt", "content": "Every quokka gets a desk."})
	if got := kadd(t, admin, ns, map[string]any{"source_uri": "bob.txt", "content": "Bob's quokka plan is secret.", "user_id": "bob"}); got["user_id"] != "bob" {
		t.Fatalf("a write for bob answered %v", got)
	}
	// A token bound to alice writes as alice, and names no other user.
	if got := kadd(t, alice, ns, map[string]any{"source_uri": "alice.txt", "content": "Alice feeds the quokka."}); got["user_id"] != "alice" {
		t.Fatalf("alice's write answered %v", got)
	}
	if r := kwrite(t, alice, http.MethodPost, ns, map[string]any{"source_uri": "x.txt", "content": "x", "user_id": "bob"}); r.Status != http.StatusForbidden || r.ErrorCode() != "PERMISSION_DENIED" {
		t.Errorf("alice writing for bob: %d %s; want 403 PERMISSION_DENIED", r.Status, r.Body)
	}
	// A source keeps its user: alice takes neither bob's nor the namespace's.
	for _, uri := range []string{"bob.txt", "handbook.txt"} {
		if r := kwrite(t, alice, http.MethodPut, ns, map[string]any{"source_uri": uri, "content": "taken"}); r.Status != http.StatusConflict || r.ErrorCode() != "PRECONDITION_FAILED" {
			t.Errorf("alice writing over %s: %d %s; want 409 PRECONDITION_FAILED", uri, r.Status, r.Body)
		}
	}
	if r := kwrite(t, admin, http.MethodPut, ns, map[string]any{"source_uri": "bob.txt", "content": "no user now"}); r.Status != http.StatusConflict {
		t.Errorf("an unbound write of bob.txt for no user: %d %s; want 409", r.Status, r.Body)
	}
	for who, c := range map[string]*testenv.Client{"alice": alice, "bob": bob} {
		own := who + ".txt"
		if got := sorted(hitURIs(ksearch(t, c, ns, map[string]any{"query": "quokka"}))); !slices.Equal(got, sorted([]string{"handbook.txt", own})) {
			t.Errorf("%s's search: %v", who, got)
		}
		if got := klist(t, c, ns, ""); !slices.Equal(got, sorted([]string{"handbook.txt", own})) {
			t.Errorf("%s's list: %v", who, got)
		}
	}
	for _, path := range []string{"/document?source_uri=bob.txt", "/outline?source_uri=bob.txt"} {
		if r := alice.Do(t, http.MethodGet, kpath(ns, path), nil); r.Status != http.StatusNotFound {
			t.Errorf("alice reading %s: %d %s; want 404", path, r.Status, r.Body)
		}
	}
	if r := alice.Do(t, http.MethodDelete, kpath(ns, "/document?source_uri=bob.txt"), nil); r.Status != http.StatusNotFound {
		t.Errorf("alice deleting bob.txt: %d %s; want 404", r.Status, r.Body)
	}
	if r := kget(t, bob, ns, "bob.txt"); r.Status != http.StatusOK || r.JSON(t)["user_id"] != "bob" {
		t.Errorf("bob reading his document: %d %s", r.Status, r.Body)
	}
	// An unbound token sees every document, or names a user to see that user's view.
	if got := sorted(hitURIs(ksearch(t, admin, ns, map[string]any{"query": "quokka"}))); len(got) != 3 {
		t.Errorf("the unbound search: %v", got)
	}
	if got := sorted(hitURIs(ksearch(t, admin, ns, map[string]any{"query": "quokka", "user_id": "alice"}))); !slices.Equal(got, []string{"alice.txt", "handbook.txt"}) {
		t.Errorf("the unbound search for alice: %v", got)
	}
	if got := klist(t, admin, ns, "?user_id=bob"); !slices.Equal(got, []string{"bob.txt", "handbook.txt"}) {
		t.Errorf("the unbound list for bob: %v", got)
	}
	// Alice naming bob in a search reads the namespace's documents alone.
	if got := hitURIs(ksearch(t, alice, ns, map[string]any{"query": "quokka", "user_id": "bob"})); !slices.Equal(got, []string{"handbook.txt"}) {
		t.Errorf("alice's search naming bob: %v", got)
	}
}

// userDocs is the world of TestKnowledgeAUsersErasureRemovesTheUsersDocuments: in ns,
// the namespace's handbook and alice's notes stay; bob's documents (one written by
// his bound token, one by an ingestion job of his), his pending job and his dataset's
// approval go with him.
type userDocs struct {
	n       *app.Process
	admin   *testenv.Client
	org, ns string
}

func newUserDocs(t *testing.T) *userDocs {
	t.Helper()
	n, url := env.SharedAPI(t)
	w := &userDocs{n: n, org: testenv.Unique(t, "org"), ns: testenv.Unique(t, "ku")}
	w.admin = testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: w.org}))
	bob := boundClient(t, n, url, w.org, "bob")
	kadd(t, w.admin, w.ns, map[string]any{"source_uri": "handbook.txt", "content": "Expenses over the axolotl limit need approval."})
	kadd(t, w.admin, w.ns, map[string]any{"source_uri": "alice.txt", "content": "Alice's axolotl travel notes.", "user_id": "alice"})
	kadd(t, bob, w.ns, map[string]any{"source_uri": "bob.txt", "content": "Bob's axolotl budget is secret."})
	// Versions are nanoseconds, past a float64's exact integers: read as a number.
	var csv struct{ Version json.Number }
	r := kwrite(t, w.admin, http.MethodPost, w.ns, map[string]any{"source_uri": "bob-orders.csv", "content": "city,qty\nOslo,3\nBergen,1\n", "user_id": "bob"})
	if err := json.Unmarshal(r.Body, &csv); err != nil || r.Status != http.StatusOK {
		t.Fatalf("bob's table: %d %s", r.Status, r.Body)
	}
	if r := w.admin.Do(t, http.MethodPost, kpath(w.ns, "/datasets:approve"), kjson(t, map[string]any{
		"source_uri": "bob-orders.csv", "dataset_id": "table-1", "version": csv.Version})); r.Status != http.StatusOK {
		t.Fatalf("approve bob's dataset: %d %s", r.Status, r.Body)
	}
	// Bob's job runs (its document is bob's), and another of his waits.
	run := func(docs []map[string]any) string {
		r := bob.Do(t, http.MethodPost, kpath(w.ns, "/ingestions"), kjson(t, map[string]any{"documents": docs}))
		if r.Status != http.StatusOK {
			t.Fatalf("bob's ingestion: %d %s", r.Status, r.Body)
		}
		return r.JSON(t)["ingestion_id"].(string)
	}
	id := run([]map[string]any{{"source_uri": "bob-ingested.txt", "content": "Bob's axolotl ingested memo."}})
	job, err := n.Knowledge.ClaimIngestOf(context.Background(), w.org, "worker-u", time.Minute)
	if err != nil || job == nil || job.Job().ID != id {
		t.Fatalf("claim bob's job: %v %v", job, err)
	}
	if err := job.Run(context.Background()); err != nil {
		t.Fatalf("run bob's job: %v", err)
	}
	run([]map[string]any{{"source_uri": "bob-pending.txt", "content": "Bob's axolotl draft."}})
	if r := w.admin.Put(t, w.ns, "limit", map[string]any{"value": "bob asked about the axolotl limit", "user_id": "bob"}); r.Status != http.StatusOK {
		t.Fatalf("memory.set: %d %s", r.Status, r.Body)
	}
	testenv.Eventually(t, 60*time.Second, "bob's documents to reach ClickHouse", func() bool {
		return len(testenv.CHStrings(t, env.CH(t), `SELECT source_uri FROM loom.chunks WHERE org = ? AND namespace = ? AND user_id = 'bob'`, w.org, w.ns)) >= 3
	})
	return w
}

// bobsRows counts bob's rows of the knowledge tables in Postgres and ClickHouse.
func (w *userDocs) bobsRows(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"knowledge_heads", "knowledge_revisions", "knowledge_jobs", "knowledge_datasets"} {
		out["pg:"+table] = int(testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.`+table+` WHERE org = $1 AND user_id = loom.user_ref($1, 'bob')`, w.org))
	}
	for _, table := range []string{"documents", "chunks"} {
		out["ch:"+table] = len(testenv.CHStrings(t, env.CH(t), `SELECT source_uri FROM loom.`+table+` WHERE org = ? AND user_id = 'bob'`, w.org))
	}
	return out
}

func TestKnowledgeAUsersErasureRemovesTheUsersDocuments(t *testing.T) {
	w := newUserDocs(t)
	for k, v := range w.bobsRows(t) {
		if v == 0 {
			t.Fatalf("before the erasure bob has no rows in %s: the test would prove nothing", k)
		}
	}
	view := w.admin.Erase(t, map[string]any{"namespace": w.ns, "user_id": "bob"})
	census := view["census"].(map[string]any)
	for _, table := range []string{"pg:loom.knowledge_heads", "pg:loom.knowledge_revisions", "pg:loom.knowledge_jobs",
		"pg:loom.knowledge_job_files", "pg:loom.knowledge_datasets", "ch:loom.documents", "ch:loom.chunks"} {
		if n, ok := census[table]; !ok || n != float64(0) {
			t.Errorf("census of %s: %v (present %t)", table, n, ok)
		}
	}
	for k, v := range w.bobsRows(t) {
		if v != 0 {
			t.Errorf("%d of bob's rows left in %s", v, k)
		}
	}
	pool := env.PG(t)
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.erased_documents WHERE org = $1 AND namespace = $2 AND erasure_id = $3::uuid`, w.org, w.ns, view["id"]); n < 3 {
		t.Errorf("%d versions of bob's documents kept as evidence, want every one", n)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.knowledge_jobs WHERE org = $1 AND namespace = $2`, w.org, w.ns); n != 0 {
		t.Errorf("%d jobs left: bob's were the namespace's only ones", n)
	}
	want := []string{"alice.txt", "handbook.txt"}
	if got := klist(t, w.admin, w.ns, ""); !slices.Equal(got, want) {
		t.Errorf("list after bob's erasure: %v, want %v", got, want)
	}
	if got := sorted(hitURIs(ksearch(t, w.admin, w.ns, map[string]any{"query": "axolotl"}))); !slices.Equal(got, want) {
		t.Errorf("search after bob's erasure: %v, want %v", got, want)
	}
	for _, uri := range []string{"bob.txt", "bob-orders.csv", "bob-ingested.txt"} {
		if r := kget(t, w.admin, w.ns, uri); r.Status != http.StatusNotFound {
			t.Errorf("get %s after bob's erasure: %d %s", uri, r.Status, r.Body)
		}
	}
	if r := w.admin.Do(t, http.MethodGet, kpath(w.ns, "/datasets?source_uri="+url.QueryEscape("bob-orders.csv")), nil); r.Status != http.StatusNotFound {
		t.Errorf("bob's dataset after his erasure: %d %s", r.Status, r.Body)
	}
	// Neither this process's index nor a replay of the topic into a fresh one holds
	// bob's chunks; the namespace's and alice's are in both.
	for name, idx := range map[string]*kindex.Index{"the process's index": w.n.KnowledgeIndex, "a replay": replayedIndex(t, w.org, w.ns)} {
		var got []string
		for _, c := range idx.Search(w.org, w.ns, "axolotl", nil, kindex.Filter{}, 20) {
			got = append(got, c.SourceURI)
		}
		if got = sorted(got); !slices.Equal(got, want) {
			t.Errorf("%s after bob's erasure: %v, want %v", name, got, want)
		}
	}
}

// replayedIndex is a fresh chunk index fed from the topic's start up to the
// namespace's generation.
func replayedIndex(t *testing.T, org, ns string) *kindex.Index {
	t.Helper()
	fresh := kindex.New(kindex.Config{})
	t.Cleanup(fresh.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pool := env.PG(t)
	go kindex.NewFollower(env.Stack.Kafka.Brokers(), env.Config(nil).Pipeline.Topic, pool, fresh, slog.New(slog.DiscardHandler)).Run(ctx)
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := fresh.WaitFor(wctx, org, ns, testenv.Generation(t, pool, org, ns)); err != nil {
		t.Fatalf("the replay did not reach the namespace's generation: %v", err)
	}
	return fresh
}

// A user's erasure across the org finds the namespaces where only the user's
// documents are (no memory of the user's there), and takes them.
func TestKnowledgeAUsersErasureAcrossTheOrgFindsItsDocuments(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "ku")
	kadd(t, c, ns, map[string]any{"source_uri": "carol.txt", "content": "Carol's okapi notes.", "user_id": "carol"})
	kadd(t, c, ns, map[string]any{"source_uri": "shared.txt", "content": "The okapi is a giraffid."})
	view := c.Erase(t, map[string]any{"user_id": "carol"})
	if n, ok := view["census"].(map[string]any)["pg:loom.knowledge_heads"]; !ok || n != float64(0) {
		t.Errorf("census of the heads: %v (present %t)", n, ok)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.knowledge_revisions WHERE org = $1 AND user_id = loom.user_ref($1, 'carol')`, org); n != 0 {
		t.Errorf("%d of carol's revisions left", n)
	}
	if got := hitURIs(ksearch(t, c, ns, map[string]any{"query": "okapi"})); !slices.Equal(got, []string{"shared.txt"}) {
		t.Errorf("search after carol's erasure: %v", got)
	}
}

// A job writes its documents for its user: a file whose source is another user's or
// the namespace's fails with the write's refusal, and the job goes on.
func TestKnowledgeAnIngestionKeepsEachSourcesUser(t *testing.T) {
	n, url := env.SharedAPI(t)
	org, ns := testenv.Unique(t, "org"), testenv.Unique(t, "ku")
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	bob := boundClient(t, n, url, org, "bob")
	kadd(t, admin, ns, map[string]any{"source_uri": "handbook.txt", "content": "The namespace's tapir handbook."})
	r := bob.Do(t, http.MethodPost, kpath(ns, "/ingestions"), kjson(t, map[string]any{"documents": []map[string]any{
		{"source_uri": "handbook.txt", "content": "Bob's tapir handbook."}, {"source_uri": "bob-new.txt", "content": "Bob's tapir."}}}))
	if r.Status != http.StatusOK {
		t.Fatalf("bob's ingestion: %d %s", r.Status, r.Body)
	}
	id := r.JSON(t)["ingestion_id"].(string)
	run, err := n.Knowledge.ClaimIngestOf(context.Background(), org, "worker-k", time.Minute)
	if err != nil || run == nil || run.Job().ID != id {
		t.Fatalf("claim bob's job: %v %v", run, err)
	}
	if err := run.Run(context.Background()); err != nil {
		t.Fatalf("run bob's job: %v", err)
	}
	st := ingestStatus(t, bob, ns, id)
	if st["user_id"] != "bob" || st["written"] != float64(1) || st["failed"] != float64(1) {
		t.Fatalf("bob's job: %v", st)
	}
	if f := st["files"].([]any)[0].(map[string]any); f["state"] != "failed" || f["error_code"] != "PRECONDITION_FAILED" {
		t.Errorf("the file over the namespace's handbook: %v", f)
	}
	if d := kget(t, admin, ns, "handbook.txt").JSON(t); d["content"] != "The namespace's tapir handbook." || d["user_id"] != nil {
		t.Errorf("the namespace's handbook after bob's job: %v", d)
	}
	if d := kget(t, bob, ns, "bob-new.txt").JSON(t); d["user_id"] != "bob" {
		t.Errorf("bob's new document: %v", d)
	}
}
