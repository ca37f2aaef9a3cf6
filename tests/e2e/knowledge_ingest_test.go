package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	kcommand "github.com/loomplane/loom/knowledge/command"
	"github.com/loomplane/loom/knowledge/parse/parsetest"
	"github.com/loomplane/loom/tests/testenv"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// knowledge.ingest end to end over the real stores: jobs committed in Postgres, run by
// the workers role through the knowledge commit under a lease and its fencing token,
// followed by ingest_status, stopped by ingest_cancel.

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// ingestJob submits docs as JSON and answers the job's id.
func ingestJob(t *testing.T, c *testenv.Client, ns string, docs []map[string]any) string {
	t.Helper()
	r := c.Do(t, http.MethodPost, kpath(ns, "/ingestions"), kjson(t, map[string]any{"documents": docs}))
	if r.Status != http.StatusOK || r.JSON(t)["state"] != "pending" {
		t.Fatalf("knowledge.ingest: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["ingestion_id"].(string)
}

func ingestStatus(t *testing.T, c *testenv.Client, ns, id string) map[string]any {
	t.Helper()
	r := c.Do(t, http.MethodGet, kpath(ns, "/ingestions/"+id), nil)
	if r.Status != http.StatusOK {
		t.Fatalf("knowledge.ingest_status: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)
}

// awaitIngest waits for a job the workers role runs to end, and answers its status.
func awaitIngest(t *testing.T, c *testenv.Client, ns, id string) map[string]any {
	t.Helper()
	var st map[string]any
	testenv.Eventually(t, 2*time.Minute, "the ingestion job to end", func() bool {
		st = ingestStatus(t, c, ns, id)
		s := st["state"]
		return s == "completed" || s == "failed" || s == "cancelled"
	})
	return st
}

func ingestAPI(t *testing.T) (*testenv.Client, string) {
	t.Helper()
	n, url, _ := env.Serve(t, []string{"api", "workers"}, nil)
	org := testenv.Unique(t, "org")
	return testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org})), org
}

// A job of a text, a Markdown, a CSV, a malformed PDF and a zip bomb completes with
// its counts: three written and searchable, two failed with their codes and nothing of
// them written; the same documents again are unchanged; a multipart upload and a tar
// archive are jobs too.
func TestKnowledgeIngestCompletesAndIsSearchable(t *testing.T) {
	c, _ := ingestAPI(t)
	ns := testenv.Unique(t, "ki")
	docs := []map[string]any{
		{"source_uri": "handbook/leave.txt", "content_base64": b64("Parental leave\n\nA wombat sabbatical lasts twelve weeks.")},
		{"source_uri": "handbook/oncall.md", "content_base64": b64("# On call\n\nThe pager rotates every Tuesday at noon.")},
		{"source_uri": "tables/offices.csv", "content_base64": b64("city,desks\nLisbon,40\nOslo,12\n")},
		{"source_uri": "broken.pdf", "content_base64": b64("%PDF-1.4 this is not a pdf at all")},
		{"source_uri": "bomb.xlsx", "content_base64": base64.StdEncoding.EncodeToString(parsetest.ZipBombXLSX(t, 120<<20))},
	}
	failed := map[string]string{"broken.pdf": kcommand.CodeMalformed, "bomb.xlsx": kcommand.CodeTooLarge}
	id := ingestJob(t, c, ns, docs)
	st := awaitIngest(t, c, ns, id)
	if st["state"] != "completed" || st["total"] != float64(5) || st["processed"] != float64(5) || st["written"] != float64(3) ||
		st["failed"] != float64(2) || st["chunks"].(float64) < 3 {
		t.Fatalf("ingest_status: %v", st)
	}
	for _, f := range st["files"].([]any) {
		f := f.(map[string]any)
		uri, _ := f["source_uri"].(string)
		if want := map[bool]string{true: "failed", false: "written"}[failed[uri] != ""]; f["state"] != want {
			t.Errorf("file %v: %v, want %s", uri, f["state"], want)
		}
		if code := failed[uri]; code != "" && f["error_code"] != code {
			t.Errorf("%s failed with %v, want %s", uri, f["error_code"], code)
		}
	}
	if uris := hitURIs(ksearch(t, c, ns, map[string]any{"query": "wombat sabbatical"})); len(uris) == 0 || uris[0] != "handbook/leave.txt" {
		t.Fatalf("knowledge.search after the ingest: %v", uris)
	}
	for uri := range failed {
		if r := kget(t, c, ns, uri); r.Status != http.StatusNotFound {
			t.Fatalf("the failed file %s has a head: %d %s", uri, r.Status, r.Body)
		}
	}

	// The same documents again: nothing new to write.
	st = awaitIngest(t, c, ns, ingestJob(t, c, ns, docs[:3]))
	if st["state"] != "completed" || st["unchanged"] != float64(3) || st["written"] != float64(0) {
		t.Fatalf("a repeated ingest: %v", st)
	}

	// multipart/form-data: each file part a document named by its file name.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	mw.WriteField("source_prefix", "uploads/")
	fw, _ := mw.CreateFormFile("files", "expenses.md")
	fw.Write([]byte("# Expenses\n\nA narwhal receipt is filed within thirty days."))
	mw.Close()
	r := c.DoHeaders(t, http.MethodPost, kpath(ns, "/ingestions"), mp.Bytes(), map[string]string{"Content-Type": mw.FormDataContentType()})
	if r.Status != http.StatusOK {
		t.Fatalf("a multipart ingest: %d %s", r.Status, r.Body)
	}
	if st = awaitIngest(t, c, ns, r.JSON(t)["ingestion_id"].(string)); st["written"] != float64(1) {
		t.Fatalf("the multipart job: %v", st)
	}
	// A tar archive: each regular file a document named by its path.
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	body := []byte("Security\n\nBadges are renewed each March by the okapi desk.")
	tw.WriteHeader(&tar.Header{Name: "./policies/security.txt", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write(body)
	tw.Close()
	r = c.DoHeaders(t, http.MethodPost, kpath(ns, "/ingestions"), tb.Bytes(), map[string]string{"Content-Type": "application/x-tar"})
	if r.Status != http.StatusOK {
		t.Fatalf("a tar ingest: %d %s", r.Status, r.Body)
	}
	if st = awaitIngest(t, c, ns, r.JSON(t)["ingestion_id"].(string)); st["written"] != float64(1) {
		t.Fatalf("the tar job: %v", st)
	}
	for q, want := range map[string]string{"narwhal receipt": "uploads/expenses.md", "okapi badges": "policies/security.txt"} {
		if uris := hitURIs(ksearch(t, c, ns, map[string]any{"query": q})); len(uris) == 0 || uris[0] != want {
			t.Errorf("search %q: %v, want %s first", q, uris, want)
		}
	}
}

// A submission the checks refuse writes nothing: a source named twice, a format Loom
// does not read.
func TestKnowledgeIngestRefusesBeforeWriting(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "ki")
	for _, tc := range []struct {
		docs   []map[string]any
		status int
		code   string
	}{
		{[]map[string]any{{"source_uri": "a.txt", "content": "x"}, {"source_uri": "a.txt", "content": "y"}}, http.StatusUnprocessableEntity, "VALIDATION_FAILED"},
		{[]map[string]any{{"source_uri": "a.txt", "content": "x"}, {"source_uri": "b.bin", "content_base64": b64("\x00\x01\x02")}}, http.StatusUnsupportedMediaType, kcommand.CodeUnsupportedFormat},
	} {
		r := c.Do(t, http.MethodPost, kpath(ns, "/ingestions"), kjson(t, map[string]any{"documents": tc.docs}))
		if r.Status != tc.status || r.ErrorCode() != tc.code {
			t.Errorf("ingest %v: %d %s, want %d %s", tc.docs, r.Status, r.Body, tc.status, tc.code)
		}
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.knowledge_jobs WHERE org = $1`, org); n != 0 {
		t.Fatalf("%d jobs written by refused submissions", n)
	}
	if r := c.Do(t, http.MethodGet, kpath(ns, "/ingestions/00000000-0000-0000-0000-000000000000"), nil); r.Status != http.StatusNotFound {
		t.Fatalf("status of an unknown job: %d %s", r.Status, r.Body)
	}
}

// A run whose lease lapsed and was taken over is fenced: its next commit writes
// nothing (LeaseLost), and the taker writes the job to its end. A cancel stops a
// running job at its run's next save, with nothing more written; a pending job is
// cancelled at once and no run takes it.
func TestKnowledgeIngestFencingAndCancel(t *testing.T) {
	ctx := context.Background()
	// No workers role: the test drives the runs itself through the plane's write side.
	n, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "ki")
	pool := env.PG(t)
	k := n.Knowledge

	id := ingestJob(t, c, ns, []map[string]any{
		{"source_uri": "fence/one.txt", "content": "the first file of a fenced job"},
		{"source_uri": "fence/two.txt", "content": "the second file of a fenced job"},
	})
	stale, err := k.ClaimIngestOf(ctx, org, "worker-a", time.Minute)
	if err != nil || stale == nil || stale.Job().ID != id {
		t.Fatalf("the first claim: %v %v", stale, err)
	}
	// worker-a stalls past its lease (its lapse is set here, not waited for); worker-b
	// takes the job over under the next token.
	testenv.Exec(t, pool, `UPDATE loom.knowledge_jobs SET lease_until = now() - interval '1 second'
		WHERE org = $1 AND ingestion_id = $2::uuid`, org, id)
	taker, err := k.ClaimIngestOf(ctx, org, "worker-b", time.Minute)
	if err != nil || taker == nil || taker.Job().ID != id || taker.Job().LeaseToken != stale.Job().LeaseToken+1 {
		t.Fatalf("the takeover: %+v %v", taker, err)
	}
	if _, err := stale.Step(ctx); !errors.Is(err, kcommand.ErrLeaseLost) {
		t.Fatalf("the stale run's step: %v, want LeaseLost", err)
	}
	for _, uri := range []string{"fence/one.txt", "fence/two.txt"} {
		if r := kget(t, c, ns, uri); r.Status != http.StatusNotFound {
			t.Fatalf("the fenced run wrote %s: %d %s", uri, r.Status, r.Body)
		}
	}
	if err := taker.Run(ctx); err != nil {
		t.Fatalf("the taker's run: %v", err)
	}
	st := ingestStatus(t, c, ns, id)
	if st["state"] != "completed" || st["written"] != float64(2) || st["runs"] != float64(2) {
		t.Fatalf("the job after the takeover: %v", st)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.knowledge_heads WHERE org = $1 AND namespace = $2`, org, ns); n != 2 {
		t.Fatalf("%d heads, want 2", n)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.knowledge_job_files WHERE org = $1 AND sealed IS NOT NULL`, org); n != 0 {
		t.Fatalf("%d file bodies kept after the job ended", n)
	}

	// Cancel a running job between its files.
	id = ingestJob(t, c, ns, []map[string]any{
		{"source_uri": "cancel/one.txt", "content": "written before the cancel"},
		{"source_uri": "cancel/two.txt", "content": "never written"},
		{"source_uri": "cancel/three.txt", "content": "never written either"},
	})
	run, err := k.ClaimIngestOf(ctx, org, "worker-c", time.Minute)
	if err != nil || run == nil || run.Job().ID != id {
		t.Fatalf("claim: %v %v", run, err)
	}
	run.SetBatch(1) // one file a commit, so the cancel lands between two
	if done, err := run.Step(ctx); done || err != nil {
		t.Fatalf("the first step: %v %v", done, err)
	}
	r := c.Do(t, http.MethodPost, kpath(ns, "/ingestions/"+id+":cancel"), nil)
	if r.Status != http.StatusOK || r.JSON(t)["state"] != "processing" || r.JSON(t)["cancel_requested"] != true {
		t.Fatalf("ingest_cancel of a running job: %d %s", r.Status, r.Body)
	}
	if done, err := run.Step(ctx); !done || err != nil {
		t.Fatalf("the step after the cancel: %v %v, want the job ended", done, err)
	}
	st = ingestStatus(t, c, ns, id)
	if st["state"] != "cancelled" || st["written"] != float64(1) || st["cancelled_by"] == "" {
		t.Fatalf("the cancelled job: %v", st)
	}
	if r := kget(t, c, ns, "cancel/two.txt"); r.Status != http.StatusNotFound {
		t.Fatalf("a file after the cancel was written: %d %s", r.Status, r.Body)
	}

	// Cancel a pending job: it ends at once, and no run takes it.
	id = ingestJob(t, c, ns, []map[string]any{{"source_uri": "pending.txt", "content": "never run"}})
	if r := c.Do(t, http.MethodPost, kpath(ns, "/ingestions/"+id+":cancel"), nil); r.Status != http.StatusOK || r.JSON(t)["state"] != "cancelled" {
		t.Fatalf("ingest_cancel of a pending job: %d %s", r.Status, r.Body)
	}
	if run, err := k.ClaimIngestOf(ctx, org, "worker-d", time.Minute); err != nil || (run != nil && run.Job().ID == id) {
		t.Fatalf("a cancelled job was claimed: %v %v", run, err)
	}
}

// A step reads the job's files up to its byte bound, and at least one file however
// large: two small files go in one commit, and a file past the bound in the next one
// alone; the job completes with every file written.
func TestKnowledgeIngestStepHoldsItsByteBound(t *testing.T) {
	ctx := context.Background()
	// No workers role: the test steps the run itself.
	n, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "ki")
	k := n.Knowledge
	id := ingestJob(t, c, ns, []map[string]any{
		{"source_uri": "bound/one.txt", "content": strings.Repeat("small first file ", 60)},
		{"source_uri": "bound/two.txt", "content": strings.Repeat("small second file ", 60)},
		{"source_uri": "bound/three.txt", "content": strings.Repeat("a file past the step's bound ", 400)},
	})
	run, err := k.ClaimIngestOf(ctx, org, "worker-bound", time.Minute)
	if err != nil || run == nil || run.Job().ID != id {
		t.Fatalf("claim: %v %v", run, err)
	}
	run.SetStepBytes(6000) // the two small files (about 1 KB each, sealed), not the third (12 KB)
	for i, want := range []float64{2, 3} {
		if done, err := run.Step(ctx); done || err != nil {
			t.Fatalf("step %d: %v %v", i+1, done, err)
		}
		if st := ingestStatus(t, c, ns, id); st["written"] != want {
			t.Fatalf("after step %d: %v, want %v files written", i+1, st, want)
		}
	}
	if done, err := run.Step(ctx); !done || err != nil {
		t.Fatalf("the last step: %v %v, want the job ended", done, err)
	}
	if st := ingestStatus(t, c, ns, id); st["state"] != "completed" || st["written"] != float64(3) {
		t.Fatalf("the job: %v", st)
	}
	for _, uri := range []string{"bound/one.txt", "bound/two.txt", "bound/three.txt"} {
		if r := kget(t, c, ns, uri); r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", uri, r.Status, r.Body)
		}
	}
}

// A repeated Idempotency-Key replays the first answer: an add, a bulk add, an ingest
// and a delete write once; the key with another body is 409 IDEMPOTENT_CONFLICT.
func TestKnowledgeIdempotencyKeyReplays(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "ki")
	send := func(method, path, key string, body any) *testenv.Response {
		var b []byte
		if body != nil {
			b = kjson(t, body)
		}
		return c.DoHeaders(t, method, kpath(ns, path), b, map[string]string{"Idempotency-Key": key})
	}
	// Postgres keeps an answer as jsonb: a replay is the same JSON, not the same bytes.
	same := func(a, b *testenv.Response) bool { return reflect.DeepEqual(a.JSON(t), b.JSON(t)) }
	doc := map[string]any{"source_uri": "idem.txt", "content": "written once under one key"}
	first := send(http.MethodPost, "", "add-1", doc)
	again := send(http.MethodPost, "", "add-1", doc)
	if first.Status != http.StatusOK || again.Status != http.StatusOK || !same(first, again) {
		t.Fatalf("a repeated add: %d %s then %d %s", first.Status, first.Body, again.Status, again.Body)
	}
	if r := send(http.MethodPost, "", "add-1", map[string]any{"source_uri": "idem.txt", "content": "other"}); r.Status != http.StatusConflict ||
		r.ErrorCode() != kcommand.CodeIdempotentConflict {
		t.Fatalf("the key with another body: %d %s", r.Status, r.Body)
	}
	bulk := map[string]any{"documents": []map[string]any{{"source_uri": "b1.txt", "content": "one"}, {"source_uri": "b2.txt", "content": "two"}}}
	if a, b := send(http.MethodPost, ":bulkAdd", "bulk-1", bulk), send(http.MethodPost, ":bulkAdd", "bulk-1", bulk); a.Status != http.StatusOK || !same(a, b) {
		t.Fatalf("a repeated bulk add: %d %s then %d %s", a.Status, a.Body, b.Status, b.Body)
	}
	if a, b := send(http.MethodDelete, "/document?source_uri=b1.txt", "del-1", nil), send(http.MethodDelete, "/document?source_uri=b1.txt", "del-1", nil); a.Status != http.StatusOK || !same(a, b) {
		t.Fatalf("a repeated delete: %d %s then %d %s", a.Status, a.Body, b.Status, b.Body)
	}
	job := map[string]any{"documents": []map[string]any{{"source_uri": "j.txt", "content": "one job"}}}
	if a, b := send(http.MethodPost, "/ingestions", "job-1", job), send(http.MethodPost, "/ingestions", "job-1", job); a.Status != http.StatusOK ||
		a.JSON(t)["ingestion_id"] != b.JSON(t)["ingestion_id"] {
		t.Fatalf("a repeated ingest: %d %s then %d %s", a.Status, a.Body, b.Status, b.Body)
	}
	pool := env.PG(t)
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.knowledge_revisions WHERE org = $1 AND namespace = $2`, org, ns); n != 4 {
		t.Fatalf("%d revisions, want 4 (an add, two bulk adds, a delete)", n)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.knowledge_jobs WHERE org = $1`, org); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
}

// loomd knowledge ingest submits a folder and follows the job to its end.
func TestKnowledgeIngestCLI(t *testing.T) {
	n, url, _ := env.Serve(t, []string{"api", "workers"}, nil)
	org := testenv.Unique(t, "org")
	token := env.Token(t, n, auth.NewToken{Org: org})
	ns := testenv.Unique(t, "ki")
	dir := t.TempDir()
	for name, body := range map[string]string{
		"guide/setup.md":  "# Setup\n\nInstall the capybara agent before the first run.",
		"guide/faq.txt":   "Questions\n\nThe dashboard refreshes every minute.",
		".hidden/skip.md": "not ingested",
		"data/teams.csv":  "team,lead\nbilling,ana\nsearch,ben\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := testenv.Build(t, "github.com/loomplane/loom/cmd/loomd")
	cmd := exec.Command(bin, "knowledge", "ingest", "--url", url, "--namespace", ns, "--prefix", "kb/", dir)
	cmd.Env = append(os.Environ(), "LOOM_TOKEN="+token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("loomd knowledge ingest: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "ingested 3 files") || !strings.Contains(stdout.String(), "3 written") ||
		!strings.Contains(stderr.String(), "3/3 files") {
		t.Fatalf("loomd knowledge ingest said:\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
	}
	c := testenv.NewClient(url, token)
	docs, err := c.Typed(t).ListDocuments(context.Background(), ns, client.DocumentListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, d := range docs.Documents {
		uris = append(uris, d.SourceURI)
	}
	if strings.Join(uris, " ") != "kb/data/teams.csv kb/guide/faq.txt kb/guide/setup.md" {
		t.Fatalf("the documents the CLI wrote: %v", uris)
	}
	if got := hitURIs(ksearch(t, c, ns, map[string]any{"query": "capybara agent"})); len(got) == 0 || got[0] != "kb/guide/setup.md" {
		t.Fatalf("search after the CLI's ingest: %v", got)
	}
}

// memory.ask reads the namespace's documents beside its memories: the prompt shows
// both, and the answer cites the document passage it used as a knowledge citation;
// a namespace with no memory is answered from its documents; knowledge: false leaves
// them out.
func TestAskReadsKnowledge(t *testing.T) {
	srv := llmtest.New(t)
	srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		cites := []string{"m1"}
		if r.Contains("Document passages:") {
			cites = []string{"k1"}
			if r.Contains("[m1]") {
				cites = []string{"m1", "k1"}
			}
		}
		return llmtest.JSON(map[string]any{"answerable": true, "answer": "Oolong, from the kitchen.", "citations": cites})
	})
	n, url := env.API(t, func(c *config.Config) {
		// Not an extraction worker: another test's deferred request would reach this script.
		c.LLM.BaseURL, c.LLM.Model, c.Command.Extraction.QueueEnabled = srv.URL, "m", false
	})
	org := testenv.Unique(t, "org")
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	ns := testenv.Unique(t, "ask")
	if r := c.Put(t, ns, "drink", map[string]any{"value": "bob drinks oolong tea every morning", "user_id": "bob"}); r.Status != http.StatusOK {
		t.Fatalf("memory.set: %d %s", r.Status, r.Body)
	}
	kadd(t, c, ns, map[string]any{"source_uri": "handbook/kitchen.txt", "content": "The kitchen stocks oolong tea; the kettle is descaled on Fridays."})
	ask := func(ns string, body map[string]any) map[string]any {
		t.Helper()
		r := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:ask", kjson(t, body))
		if r.Status != http.StatusOK {
			t.Fatalf("memory.ask: %d %s", r.Status, r.Body)
		}
		return r.JSON(t)
	}
	a := ask(ns, map[string]any{"query": "oolong tea", "user_id": "bob"})
	kc, _ := a["knowledge_citations"].([]any)
	if a["abstained"] != false || len(a["citations"].([]any)) != 1 || len(kc) != 1 ||
		kc[0].(map[string]any)["source_uri"] != "handbook/kitchen.txt" || !strings.HasPrefix(kc[0].(map[string]any)["cite"].(string), "k:") {
		t.Fatalf("memory.ask with knowledge: %v", a)
	}
	a = ask(ns, map[string]any{"query": "oolong tea", "user_id": "bob", "knowledge": false})
	if a["knowledge_read"] != float64(0) || len(a["knowledge_citations"].([]any)) != 0 || len(a["citations"].([]any)) != 1 {
		t.Fatalf("memory.ask with knowledge off: %v", a)
	}
	docsOnly := testenv.Unique(t, "ask")
	kadd(t, c, docsOnly, map[string]any{"source_uri": "handbook/kitchen.txt", "content": "The kitchen stocks oolong tea; the kettle is descaled on Fridays."})
	a = ask(docsOnly, map[string]any{"query": "oolong tea kitchen"})
	if a["abstained"] != false || len(a["knowledge_citations"].([]any)) != 1 || len(a["citations"].([]any)) != 0 {
		t.Fatalf("memory.ask of a namespace with documents only: %v", a)
	}
}

// A namespace's erasure removes its ingestion jobs and their sealed files: the census
// counts none left, the status answers 404, and a run that held the job before the
// erasure stops at its next save (JobGone) with nothing written.
func TestKnowledgeIngestErasureRemovesJobs(t *testing.T) {
	ctx := context.Background()
	n, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "ki")
	kadd(t, c, ns, map[string]any{"source_uri": "seed.txt", "content": "a document so the namespace has a generation"})
	id := ingestJob(t, c, ns, []map[string]any{{"source_uri": "held.txt", "content": "the secret tapir plan"}})
	run, err := n.Knowledge.ClaimIngestOf(ctx, org, "worker-e", time.Minute)
	if err != nil || run == nil || run.Job().ID != id {
		t.Fatalf("claim: %v %v", run, err)
	}
	view := c.Erase(t, map[string]any{"namespace": ns})
	census := view["census"].(map[string]any)
	for _, table := range []string{"pg:loom.knowledge_jobs", "pg:loom.knowledge_job_files"} {
		if n, ok := census[table]; !ok || n != float64(0) {
			t.Errorf("census of %s: %v (present %t)", table, n, ok)
		}
	}
	pool := env.PG(t)
	for _, table := range []string{"knowledge_jobs", "knowledge_job_files"} {
		if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.`+table+` WHERE org = $1 AND namespace = $2`, org, ns); n != 0 {
			t.Errorf("%d rows of loom.%s left", n, table)
		}
	}
	if r := c.Do(t, http.MethodGet, kpath(ns, "/ingestions/"+id), nil); r.Status != http.StatusNotFound {
		t.Fatalf("status after the erasure: %d %s", r.Status, r.Body)
	}
	if _, err := run.Step(ctx); !errors.Is(err, kcommand.ErrJobGone) {
		t.Fatalf("the run after the erasure: %v, want JobGone", err)
	}
	if r := kget(t, c, ns, "held.txt"); r.Status != http.StatusNotFound {
		t.Fatalf("the erased job's file was written: %d %s", r.Status, r.Body)
	}
}

// A job no run saved for 30 days is swept, its files with it; one saved 29 days ago
// is kept.
func TestKnowledgeIngestJobsExpireAfterThirtyDays(t *testing.T) {
	ctx := context.Background()
	n, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kx")
	old := ingestJob(t, c, ns, []map[string]any{{"source_uri": "old.txt", "content": "a job nobody saved for a month"}})
	recent := ingestJob(t, c, ns, []map[string]any{{"source_uri": "recent.txt", "content": "a job saved four weeks ago"}})
	pool := env.PG(t)
	for id, days := range map[string]int{old: 31, recent: 29} {
		testenv.Exec(t, pool, `UPDATE loom.knowledge_jobs SET updated_at = now() - make_interval(days => $4)
			WHERE org = $1 AND namespace = $2 AND ingestion_id = $3::uuid`, org, ns, id, days)
	}
	swept, err := n.Knowledge.SweepIngestJobs(ctx)
	if err != nil || swept < 1 {
		t.Fatalf("the sweep: %d jobs, %v", swept, err)
	}
	if r := c.Do(t, http.MethodGet, kpath(ns, "/ingestions/"+old), nil); r.Status != http.StatusNotFound {
		t.Fatalf("the month-old job after the sweep: %d %s", r.Status, r.Body)
	}
	if st := ingestStatus(t, c, ns, recent); st["state"] != "pending" {
		t.Fatalf("the recent job after the sweep: %v", st)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.knowledge_job_files WHERE org = $1 AND namespace = $2 AND ingestion_id = $3::uuid`,
		org, ns, old); n != 0 {
		t.Fatalf("%d files of the swept job left", n)
	}
}

// knowledge.synthesize answers from the passages knowledge.search finds, citing each
// it used by its chunk; it abstains without a call when nothing is found, and when the
// model says the passages do not answer.
func TestKnowledgeSynthesize(t *testing.T) {
	srv := llmtest.New(t)
	n, url := env.API(t, func(c *config.Config) {
		// Not an extraction worker: another test's deferred request would reach this script.
		c.LLM.BaseURL, c.LLM.Model, c.Command.Extraction.QueueEnabled = srv.URL, "m", false
	})
	org := testenv.Unique(t, "org")
	token := env.Token(t, n, auth.NewToken{Org: org})
	c := testenv.NewClient(url, token)
	ns := testenv.Unique(t, "syn")
	kadd(t, c, ns, map[string]any{"source_uri": "handbook/travel.md", "content": "# Travel\n\nFlights over six hours are booked in premium economy."})
	kadd(t, c, ns, map[string]any{"source_uri": "handbook/food.md", "content": "# Food\n\nThe canteen serves lunch from noon."})
	synth := func(body map[string]any) map[string]any {
		t.Helper()
		r := c.Do(t, http.MethodPost, kpath(ns, ":synthesize"), kjson(t, body))
		if r.Status != http.StatusOK {
			t.Fatalf("knowledge.synthesize: %d %s", r.Status, r.Body)
		}
		return r.JSON(t)
	}
	srv.ReplyWhen(func(r llmtest.ChatRequest) bool { return r.Contains("premium economy") },
		llmtest.JSON(map[string]any{"answerable": true, "answer": "Premium economy.", "citations": []string{"k1", "k9"}}))
	a := synth(map[string]any{"query": "premium economy flights booked", "limit": 1})
	cites, _ := a["citations"].([]any)
	if a["abstained"] != false || a["answer"] != "Premium economy." || len(cites) != 1 || a["citations_dropped"] != float64(1) ||
		cites[0].(map[string]any)["source_uri"] != "handbook/travel.md" || !strings.HasPrefix(cites[0].(map[string]any)["cite"].(string), "k:") {
		t.Fatalf("knowledge.synthesize: %v", a)
	}
	srv.Reply(llmtest.JSON(map[string]any{"answerable": false, "answer": "", "citations": []string{}}))
	if a := synth(map[string]any{"query": "canteen parking rules", "source_prefix": "handbook/food"}); a["abstained"] != true || a["abstain_code"] != "pool_does_not_answer" {
		t.Fatalf("an unanswerable synthesis: %v", a)
	}
	calls := len(srv.Chats())
	if a := synth(map[string]any{"query": "parking rules", "source_prefix": "nowhere/"}); a["abstained"] != true || a["abstain_code"] != "no_passages" ||
		len(srv.Chats()) != calls {
		t.Fatalf("a synthesis with no passages: %v (calls %d → %d)", a, calls, len(srv.Chats()))
	}

	// An agent asks the same through MCP's knowledge_synthesize, over the public client.
	cs := goSDKSession(t, &sdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}})
	srv.ReplyWhen(func(r llmtest.ChatRequest) bool { return r.Contains("premium economy") },
		llmtest.JSON(map[string]any{"answerable": true, "answer": "Premium economy.", "citations": []string{"k1"}}))
	res := callTool(t, cs, "knowledge_synthesize", map[string]any{"namespace": ns, "query": "premium economy flights booked", "limit": 1})
	var syn client.Synthesis
	if b, err := json.Marshal(res.StructuredContent); err != nil || json.Unmarshal(b, &syn) != nil || res.IsError {
		t.Fatalf("mcp knowledge_synthesize: %v %s", err, resultText(res))
	}
	if syn.Abstained || syn.Answer != "Premium economy." || len(syn.Citations) != 1 || syn.Citations[0].SourceURI != "handbook/travel.md" ||
		!strings.Contains(resultText(res), "Premium economy.") {
		t.Fatalf("mcp knowledge_synthesize answered %+v (%q)", syn, resultText(res))
	}
	res = callTool(t, cs, "knowledge_synthesize", map[string]any{"namespace": ns, "query": "parking rules", "source_prefix": "nowhere/"})
	if res.IsError || !strings.Contains(resultText(res), "abstained (no_passages)") {
		t.Fatalf("mcp knowledge_synthesize with no passages: %s", resultText(res))
	}
}
