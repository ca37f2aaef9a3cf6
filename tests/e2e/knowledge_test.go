package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	kindex "github.com/loomplane/loom/knowledge/index"
	"github.com/loomplane/loom/tests/testenv"
)

// The knowledge plane end to end over the real stores: a document committed through
// the heads and the outbox, published, projected into ClickHouse and applied to the
// process's chunk index, read back by get, list, outline and search.

func kpath(ns, rest string) string { return "/v1/namespaces/" + ns + "/knowledge" + rest }

func kjson(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func kadd(t *testing.T, c *testenv.Client, ns string, doc map[string]any) map[string]any {
	t.Helper()
	r := c.Do(t, http.MethodPost, kpath(ns, ""), kjson(t, doc))
	if r.Status != http.StatusOK {
		t.Fatalf("knowledge.add %v: %d %s", doc["source_uri"], r.Status, r.Body)
	}
	return r.JSON(t)
}

func ksearch(t *testing.T, c *testenv.Client, ns string, req map[string]any) map[string]any {
	t.Helper()
	r := c.Do(t, http.MethodPost, kpath(ns, ":search"), kjson(t, req))
	if r.Status != http.StatusOK {
		t.Fatalf("knowledge.search %v: %d %s", req, r.Status, r.Body)
	}
	return r.JSON(t)
}

func hitURIs(ans map[string]any) []string {
	var out []string
	for _, h := range ans["hits"].([]any) {
		out = append(out, h.(map[string]any)["source_uri"].(string))
	}
	return out
}

func kget(t *testing.T, c *testenv.Client, ns, uri string) *testenv.Response {
	t.Helper()
	return c.Do(t, http.MethodGet, kpath(ns, "/document?source_uri="+url.QueryEscape(uri)), nil)
}

func TestKnowledgeRoundTrip(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kn")
	handbook := "Expense policy\n\nA quokka reimbursement needs a receipt within thirty days.\n\nTravel is booked through the portal."
	a := kadd(t, c, ns, map[string]any{"source_uri": "handbook/expenses.txt", "content": handbook, "tags": []string{"policy"}})
	kadd(t, c, ns, map[string]any{"source_uri": "tickets/1042.txt", "content": "The printer on floor two jams on duplex jobs."})
	if a["version"].(float64) <= 0 || a["revision"].(float64) <= 0 || a["chunk_count"].(float64) < 1 {
		t.Fatalf("knowledge.add answered %v", a)
	}

	r := kget(t, c, ns, "handbook/expenses.txt")
	if r.Status != http.StatusOK || r.JSON(t)["content"] != handbook || r.JSON(t)["doc_id"] != a["doc_id"] {
		t.Fatalf("knowledge.get: %d %s", r.Status, r.Body)
	}
	r = c.Do(t, http.MethodGet, kpath(ns, "?prefix=handbook/"), nil)
	docs := r.JSON(t)["documents"].([]any)
	if r.Status != http.StatusOK || len(docs) != 1 || docs[0].(map[string]any)["source_uri"] != "handbook/expenses.txt" {
		t.Fatalf("knowledge.list by prefix: %d %s", r.Status, r.Body)
	}
	r = c.Do(t, http.MethodGet, kpath(ns, "/outline?source_uri=handbook/expenses.txt"), nil)
	if r.Status != http.StatusOK || r.JSON(t)["version"] != a["version"] {
		t.Fatalf("knowledge.outline: %d %s", r.Status, r.Body)
	}

	// Read your writes: the search waits for the index to apply the commit.
	ans := ksearch(t, c, ns, map[string]any{"query": "quokka reimbursement receipt"})
	if uris := hitURIs(ans); len(uris) == 0 || uris[0] != "handbook/expenses.txt" || ans["stale_dropped"] != float64(0) {
		t.Fatalf("knowledge.search: %v", ans)
	}
	if uris := hitURIs(ksearch(t, c, ns, map[string]any{"query": "quokka printer", "source_prefix": "tickets/"})); len(uris) != 1 || uris[0] != "tickets/1042.txt" {
		t.Fatalf("knowledge.search by source prefix: %v", uris)
	}
	if uris := hitURIs(ksearch(t, c, ns, map[string]any{"query": "printer travel", "tags": []string{"policy"}})); len(uris) != 1 || uris[0] != "handbook/expenses.txt" {
		t.Fatalf("knowledge.search by tag: %v", uris)
	}
	if uris := hitURIs(ksearch(t, c, ns, map[string]any{"query": "quokka", "formats": []string{"pdf"}})); len(uris) != 0 {
		t.Fatalf("knowledge.search by a format no document has: %v", uris)
	}
	// Memory search never meets a knowledge chunk.
	if r := c.Search(t, ns, "quokka reimbursement receipt", 10); r.Status != http.StatusOK || len(r.JSON(t)["hits"].([]any)) != 0 {
		t.Fatalf("memory search returned knowledge: %d %s", r.Status, r.Body)
	}

	// The projection: one documents row per revision and its chunks, in ClickHouse.
	conn := env.CH(t)
	chunks := func() []string {
		return testenv.CHStrings(t, conn, `SELECT text FROM loom.chunks WHERE org = ? AND namespace = ? AND source_uri = 'handbook/expenses.txt'`, org, ns)
	}
	// The documents rows and the chunks are separate inserts: the wait is for both.
	testenv.Eventually(t, 60*time.Second, "the documents and their chunks to reach ClickHouse", func() bool {
		got := testenv.CHStrings(t, conn, `SELECT source_uri FROM loom.documents WHERE org = ? AND namespace = ?`, org, ns)
		return len(got) == 2 && len(chunks()) > 0
	})
	if n := chunks(); len(n) < 1 || !strings.Contains(strings.Join(n, " "), "quokka") {
		t.Fatalf("chunks in ClickHouse: %v", n)
	}
	// At rest the text is sealed: the head's row holds no plaintext.
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.knowledge_heads WHERE org = $1 AND namespace = $2
		AND position('quokka'::bytea IN sealed) > 0`, org, ns); n != 0 {
		t.Fatalf("%d heads hold their text in the clear", n)
	}
}

// Concurrent upserts of one source over the head they read: one commits, the others
// are refused 409 PRECONDITION_FAILED, and the source has one head, the winner's.
func TestKnowledgeConcurrentUpsertsOneHead(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kn")
	v, err := strconv.ParseInt(kadd(t, c, ns, map[string]any{"source_uri": "spec.txt", "content": "first draft"})["version_text"].(string), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 6
	statuses := make([]int, writers)
	codes := make([]string, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := c.Do(t, http.MethodPut, kpath(ns, ""), kjson(t, map[string]any{"source_uri": "spec.txt",
				"content": fmt.Sprintf("draft by writer %d", i), "expected_version": v}))
			statuses[i], codes[i] = r.Status, r.ErrorCode()
		}()
	}
	wg.Wait()
	won := -1
	for i := range writers {
		switch {
		case statuses[i] == http.StatusOK && won < 0:
			won = i
		case statuses[i] == http.StatusConflict && codes[i] == "PRECONDITION_FAILED":
		default:
			t.Fatalf("upsert %d: %d %s (winner so far %d)", i, statuses[i], codes[i], won)
		}
	}
	if won < 0 {
		t.Fatal("no upsert committed")
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.knowledge_heads WHERE org = $1 AND namespace = $2`, org, ns); n != 1 {
		t.Fatalf("%d heads", n)
	}
	if got := kget(t, c, ns, "spec.txt").JSON(t)["content"]; got != fmt.Sprintf("draft by writer %d", won) {
		t.Fatalf("the head holds %v; writer %d won", got, won)
	}
	// Two revisions committed (the add and the winner), each with its key.
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.knowledge_revisions WHERE org = $1 AND namespace = $2`, org, ns); n != 2 {
		t.Fatalf("%d revisions", n)
	}

	// An upsert of the head's own content commits nothing.
	r := c.Do(t, http.MethodPut, kpath(ns, ""), kjson(t, map[string]any{"source_uri": "spec.txt", "content": fmt.Sprintf("draft by writer %d", won)}))
	if r.Status != http.StatusOK || r.JSON(t)["unchanged"] != true {
		t.Fatalf("an unchanged upsert: %d %s", r.Status, r.Body)
	}

	// A bulk add naming a source twice is refused before anything is written.
	gen := testenv.Generation(t, env.PG(t), org, ns)
	r = c.Do(t, http.MethodPost, kpath(ns, ":bulkAdd"), kjson(t, map[string]any{"documents": []map[string]any{
		{"source_uri": "a.txt", "content": "one"}, {"source_uri": "b.txt", "content": "two"}, {"source_uri": "a.txt", "content": "three"}}}))
	if r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "VALIDATION_FAILED" {
		t.Fatalf("a bulk add naming a source twice: %d %s", r.Status, r.Body)
	}
	if after := testenv.Generation(t, env.PG(t), org, ns); after != gen || kget(t, c, ns, "b.txt").Status != http.StatusNotFound {
		t.Fatalf("the refused bulk add wrote something: generation %d → %d", gen, after)
	}
	// A bulk add over a head that moved is refused whole.
	r = c.Do(t, http.MethodPost, kpath(ns, ":bulkAdd"), kjson(t, map[string]any{"documents": []map[string]any{
		{"source_uri": "a.txt", "content": "one"}, {"source_uri": "spec.txt", "content": "stale", "expected_version": v}}}))
	if r.Status != http.StatusConflict || kget(t, c, ns, "a.txt").Status != http.StatusNotFound {
		t.Fatalf("a bulk add over a moved head: %d %s", r.Status, r.Body)
	}
	r = c.Do(t, http.MethodPost, kpath(ns, ":bulkAdd"), kjson(t, map[string]any{"documents": []map[string]any{
		{"source_uri": "a.txt", "content": "one"}, {"source_uri": "b.txt", "content": "two"}}}))
	if r.Status != http.StatusOK || len(r.JSON(t)["documents"].([]any)) != 2 {
		t.Fatalf("a bulk add: %d %s", r.Status, r.Body)
	}
}

func TestKnowledgeDeleteRestore(t *testing.T) {
	_, c, _ := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kn")
	kadd(t, c, ns, map[string]any{"source_uri": "runbook.txt", "content": "Restart the wombat service with the blue switch."})
	if uris := hitURIs(ksearch(t, c, ns, map[string]any{"query": "wombat switch"})); len(uris) != 1 {
		t.Fatalf("before the delete: %v", uris)
	}
	del := c.Do(t, http.MethodDelete, kpath(ns, "/document?source_uri=runbook.txt"), nil)
	if del.Status != http.StatusOK || del.JSON(t)["deleted"] != true {
		t.Fatalf("knowledge.delete: %d %s", del.Status, del.Body)
	}
	if r := kget(t, c, ns, "runbook.txt"); r.Status != http.StatusNotFound {
		t.Fatalf("get of a deleted document: %d %s", r.Status, r.Body)
	}
	if uris := hitURIs(ksearch(t, c, ns, map[string]any{"query": "wombat switch"})); len(uris) != 0 {
		t.Fatalf("search after the delete: %v", uris)
	}
	if r := c.Do(t, http.MethodDelete, kpath(ns, "/document?source_uri=runbook.txt"), nil); r.Status != http.StatusNotFound {
		t.Fatalf("a second delete: %d %s", r.Status, r.Body)
	}
	r := c.Do(t, http.MethodPost, kpath(ns, "/document:restore"), kjson(t, map[string]any{"source_uri": "runbook.txt"}))
	if r.Status != http.StatusOK || r.JSON(t)["deleted"] != false {
		t.Fatalf("knowledge.restore: %d %s", r.Status, r.Body)
	}
	if got := kget(t, c, ns, "runbook.txt"); got.Status != http.StatusOK || got.JSON(t)["content"] != "Restart the wombat service with the blue switch." {
		t.Fatalf("get after the restore: %d %s", got.Status, got.Body)
	}
	if uris := hitURIs(ksearch(t, c, ns, map[string]any{"query": "wombat switch"})); len(uris) != 1 {
		t.Fatalf("search after the restore: %v", uris)
	}
	if r := c.Do(t, http.MethodPost, kpath(ns, "/document:restore"), kjson(t, map[string]any{"source_uri": "runbook.txt"})); r.Status != http.StatusConflict {
		t.Fatalf("a restore of a live document: %d %s", r.Status, r.Body)
	}
}

// Injection strings are stored and matched as the text they are: in content, tags and
// source URIs, in a search's query and in a list's prefix.
func TestKnowledgeInjectionLiteral(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kn")
	evil := "Robert'); DROP TABLE loom.knowledge_heads;-- <script>alert(1)</script> {{7*7}} ${jndi:ldap://x} \x00 end"
	uri := "notes/o'brien%_\"; DELETE FROM loom.outbox;--.txt"
	kadd(t, c, ns, map[string]any{"source_uri": uri, "content": evil, "tags": []string{"' OR '1'='1"}})
	kadd(t, c, ns, map[string]any{"source_uri": "notes/other.txt", "content": "nothing to see"})
	if got := kget(t, c, ns, uri).JSON(t); got["content"] != evil || got["tags"].([]any)[0] != "' OR '1'='1" {
		t.Fatalf("get: %v", got)
	}
	ans := ksearch(t, c, ns, map[string]any{"query": "DROP TABLE loom.knowledge_heads", "tags": []string{"' OR '1'='1"}})
	if uris := hitURIs(ans); len(uris) != 1 || uris[0] != uri {
		t.Fatalf("search: %v", ans)
	}
	// A prefix's % and _ are characters, not patterns.
	r := c.Do(t, http.MethodGet, kpath(ns, "?prefix="+url.QueryEscape("notes/o'brien%_")), nil)
	if docs := r.JSON(t)["documents"].([]any); len(docs) != 1 {
		t.Fatalf("list by a prefix holding %%: %s", r.Body)
	}
	r = c.Do(t, http.MethodGet, kpath(ns, "?prefix="+url.QueryEscape("notes/%")), nil)
	if docs := r.JSON(t)["documents"].([]any); len(docs) != 0 {
		t.Fatalf("list by prefix notes/%%: %s", r.Body)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.knowledge_heads WHERE org = $1 AND namespace = $2`, org, ns); n != 2 {
		t.Fatalf("%d heads", n)
	}
}

// A document the parser cannot read is refused with a clear 4xx, and nothing of the
// request is written: no seq drawn, no head, no outbox record.
func TestKnowledgeUnsupportedFormatWritesNothing(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kn")
	kadd(t, c, ns, map[string]any{"source_uri": "ok.txt", "content": "fine"})
	gen := testenv.Generation(t, env.PG(t), org, ns)
	r := c.Do(t, http.MethodPost, kpath(ns, ""), kjson(t, map[string]any{"source_uri": "blob.bin", "content_base64": "AAEC", "content_type": "application/x-loom-unknown"}))
	if r.Status != http.StatusUnsupportedMediaType || r.ErrorCode() != "UNSUPPORTED_FORMAT" {
		t.Fatalf("an unknown format: %d %s", r.Status, r.Body)
	}
	r = c.Do(t, http.MethodPost, kpath(ns, ":bulkAdd"), kjson(t, map[string]any{"documents": []map[string]any{
		{"source_uri": "good.txt", "content": "good"}, {"source_uri": "bad.bin", "content_base64": "AAEC", "content_type": "application/x-loom-unknown"}}}))
	if r.Status != http.StatusUnsupportedMediaType {
		t.Fatalf("a bulk add with an unknown format: %d %s", r.Status, r.Body)
	}
	r = c.Do(t, http.MethodPost, kpath(ns, ""), kjson(t, map[string]any{"source_uri": "bad\x00uri", "content": "x"}))
	if r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "VALIDATION_FAILED" {
		t.Fatalf("a source URI holding a NUL: %d %s", r.Status, r.Body)
	}
	if after := testenv.Generation(t, env.PG(t), org, ns); after != gen {
		t.Fatalf("refused writes drew seqs: generation %d → %d", gen, after)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.knowledge_heads WHERE org = $1 AND namespace = $2`, org, ns); n != 1 {
		t.Fatalf("%d heads", n)
	}
}

// A namespace's erasure takes its documents from both stores and the index: the
// census counts the knowledge tables, and nothing is left to get or search.
func TestKnowledgeErasureLeavesNothing(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kn")
	kadd(t, c, ns, map[string]any{"source_uri": "secret.txt", "content": "The platypus launch code is seven."})
	c.Do(t, http.MethodDelete, kpath(ns, "/document?source_uri=secret.txt"), nil)
	c.Do(t, http.MethodPost, kpath(ns, "/document:restore"), kjson(t, map[string]any{"source_uri": "secret.txt"}))
	kadd(t, c, ns, map[string]any{"source_uri": "other.txt", "content": "The platypus eats shrimp."})
	conn := env.CH(t)
	testenv.Eventually(t, 60*time.Second, "the documents to reach ClickHouse", func() bool {
		return len(testenv.CHStrings(t, conn, `SELECT source_uri FROM loom.documents WHERE org = ? AND namespace = ?`, org, ns)) == 4
	})
	// The topic carries the documents sealed: no plaintext of them in any record.
	if leaks := testenv.Leaks(env.TopicRecords(t), "platypus", "secret.txt"); len(leaks) != 0 {
		t.Fatalf("the topic carries a document in the clear: %v", leaks)
	}
	view := c.Erase(t, map[string]any{"namespace": ns})
	census := view["census"].(map[string]any)
	for _, table := range []string{"pg:loom.knowledge_heads", "pg:loom.knowledge_revisions", "ch:loom.documents", "ch:loom.chunks"} {
		if n, ok := census[table]; !ok || n != float64(0) {
			t.Errorf("census of %s: %v (present %t)", table, n, ok)
		}
	}
	pool := env.PG(t)
	for _, table := range []string{"knowledge_heads", "knowledge_revisions"} {
		if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.`+table+` WHERE org = $1 AND namespace = $2`, org, ns); n != 0 {
			t.Errorf("%d rows of loom.%s left", n, table)
		}
	}
	for _, table := range []string{"documents", "chunks"} {
		if n := testenv.CHStrings(t, conn, `SELECT source_uri FROM loom.`+table+` WHERE org = ? AND namespace = ?`, org, ns); len(n) != 0 {
			t.Errorf("%d rows of loom.%s left", len(n), table)
		}
	}
	if r := kget(t, c, ns, "secret.txt"); r.Status != http.StatusNotFound {
		t.Fatalf("get after the erasure: %d %s", r.Status, r.Body)
	}
	if uris := hitURIs(ksearch(t, c, ns, map[string]any{"query": "platypus launch"})); len(uris) != 0 {
		t.Fatalf("search after the erasure: %v", uris)
	}
	// A replay of the topic into a fresh chunk index brings nothing back: the erased
	// records' keys are gone.
	fresh := kindex.New(kindex.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go kindex.NewFollower(env.Stack.Kafka.Brokers(), env.Config(nil).Pipeline.Topic, pool, fresh, slog.New(slog.DiscardHandler)).Run(ctx)
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := fresh.WaitFor(wctx, org, ns, testenv.Generation(t, pool, org, ns)); err != nil {
		t.Fatalf("the replay did not reach the namespace's generation: %v", err)
	}
	if got := fresh.Search(org, ns, "platypus launch code", nil, kindex.Filter{}, 10); len(got) != 0 {
		t.Fatalf("a replay brought erased chunks back: %+v", got)
	}

	// The namespace takes documents again.
	kadd(t, c, ns, map[string]any{"source_uri": "after.txt", "content": "platypus again"})
	if uris := hitURIs(ksearch(t, c, ns, map[string]any{"query": "platypus"})); len(uris) != 1 || uris[0] != "after.txt" {
		t.Fatalf("search after a new write: %v", uris)
	}
}

// A page is checked against the heads before it is answered: a chunk whose source's
// head serves another revision (here a head moved past what the index holds, as when
// a commit's record has not reached it) is dropped and counted, never answered.
func TestKnowledgeSearchDropsWhatTheHeadsDoNotServe(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kn")
	kadd(t, c, ns, map[string]any{"source_uri": "served.txt", "content": "The narwhal tusk is a tooth."})
	kadd(t, c, ns, map[string]any{"source_uri": "moved.txt", "content": "The narwhal dives deep."})
	if uris := hitURIs(ksearch(t, c, ns, map[string]any{"query": "narwhal"})); len(uris) != 2 {
		t.Fatalf("before: %v", uris)
	}
	pool := env.PG(t)
	testenv.Exec(t, pool, `UPDATE loom.knowledge_heads SET chunks_seq = chunks_seq + 1000
		WHERE org = $1 AND namespace = $2 AND source_uri = 'moved.txt'`, org, ns)
	ans := ksearch(t, c, ns, map[string]any{"query": "narwhal"})
	if uris := hitURIs(ans); len(uris) != 1 || uris[0] != "served.txt" || ans["stale_dropped"] != float64(1) {
		t.Fatalf("after the head moved: %v", ans)
	}
}

// updated_after and updated_before keep the chunks of versions written inside the
// window, each bound excluded; a rewrite moves a source to its new version's time; a
// bound that is not a time, or a window that is empty, is refused naming its field.
func TestKnowledgeSearchFiltersByWhenAVersionWasWritten(t *testing.T) {
	_, c, _ := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kn")
	written := func(uri, content string) string {
		kadd(t, c, ns, map[string]any{"source_uri": uri, "content": content})
		for _, h := range ksearch(t, c, ns, map[string]any{"query": content, "source_prefix": uri})["hits"].([]any) {
			return h.(map[string]any)["updated_at"].(string)
		}
		t.Fatalf("%s: no hit", uri)
		return ""
	}
	first := written("first.txt", "The quokka smiles at dawn.")
	time.Sleep(5 * time.Millisecond)
	written("second.txt", "The quokka naps at noon.")
	time.Sleep(5 * time.Millisecond)
	third := written("third.txt", "The quokka hops at dusk.")
	for _, cs := range []struct {
		after, before string
		want          []string
	}{
		{first, "", []string{"second.txt", "third.txt"}},
		{"", third, []string{"first.txt", "second.txt"}},
		{first, third, []string{"second.txt"}},
		{third, "", nil},
	} {
		req := map[string]any{"query": "quokka"}
		if cs.after != "" {
			req["updated_after"] = cs.after
		}
		if cs.before != "" {
			req["updated_before"] = cs.before
		}
		got := hitURIs(ksearch(t, c, ns, req))
		slices.Sort(got)
		if !slices.Equal(got, cs.want) {
			t.Errorf("after %q before %q: %v, want %v", cs.after, cs.before, got, cs.want)
		}
	}
	// A rewrite of first.txt is a version written after third.txt's.
	time.Sleep(5 * time.Millisecond)
	written("first.txt", "The quokka smiles at dawn, again.")
	if got := hitURIs(ksearch(t, c, ns, map[string]any{"query": "quokka", "updated_after": third})); !slices.Equal(got, []string{"first.txt"}) {
		t.Errorf("after the rewrite: %v", got)
	}
	for _, cs := range []struct{ body, field string }{
		{`{"query": "quokka", "updated_after": "yesterday"}`, "updated_after"},
		{`{"query": "quokka", "updated_before": "2026-13-01T00:00:00Z"}`, "updated_before"},
		{`{"query": "quokka", "updated_after": "` + third + `", "updated_before": "` + first + `"}`, "updated_before"},
	} {
		r := c.Do(t, http.MethodPost, kpath(ns, ":search"), []byte(cs.body))
		e, _ := r.JSON(t)["error"].(map[string]any)
		if r.Status != http.StatusUnprocessableEntity || e["code"] != "VALIDATION_FAILED" || e["field"] != cs.field {
			t.Errorf("%s: %d %s, want 422 naming %s", cs.body, r.Status, r.Body, cs.field)
		}
	}
}
