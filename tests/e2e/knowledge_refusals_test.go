package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	kcommand "github.com/loomplane/loom/knowledge/command"
	"github.com/loomplane/loom/knowledge/parse/parsetest"
	"github.com/loomplane/loom/tests/testenv"
)

// The refusals over the real API: a 50 MB file (plain, gzip-encoded, in a
// multipart form, in a tar archive) and a zip bomb (added, bulk added beside a good
// document) each answer a clear 413 and write nothing: no head, no revision, no job,
// no seq drawn. The parser's own refusals are knowledge/parse's TestRefusals; a bomb
// inside an ingestion fails alone (TestKnowledgeIngestCompletesAndIsSearchable).
func TestKnowledgeOversizedFilesAndZipBombsWriteNothing(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kbig")
	kadd(t, c, ns, map[string]any{"source_uri": "ok.txt", "content": "a document that was there before"})
	pool := env.PG(t)
	gen := testenv.Generation(t, pool, org, ns)

	fifty := bytes.Repeat([]byte("fifty megabytes of prose "), 2<<20) // 50 MiB
	bomb := parsetest.ZipBombXLSX(t, 120<<20)
	bomb64 := base64.StdEncoding.EncodeToString(bomb)

	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("files", "big.txt")
	fw.Write(fifty)
	mw.Close()

	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	tw.WriteHeader(&tar.Header{Name: "big.txt", Mode: 0o644, Size: int64(len(fifty)), Typeflag: tar.TypeReg})
	tw.Write(fifty)
	tw.Close()

	cases := []struct {
		what    string
		path    string
		body    []byte
		headers map[string]string
		code    string
	}{
		{"a 50 MB document", kpath(ns, ""), kjson(t, map[string]any{"source_uri": "big.txt", "content": string(fifty)}), nil, "PAYLOAD_TOO_LARGE"},
		{"a 50 MB document, gzip-encoded", kpath(ns, ""),
			gzipOf(t, kjson(t, map[string]any{"source_uri": "big.txt", "content": string(fifty)})), map[string]string{"Content-Encoding": "gzip"}, "PAYLOAD_TOO_LARGE"},
		{"a 50 MB file in a multipart ingestion", kpath(ns, "/ingestions"), form.Bytes(),
			map[string]string{"Content-Type": mw.FormDataContentType()}, "PAYLOAD_TOO_LARGE"},
		{"a 50 MB file in a tar ingestion", kpath(ns, "/ingestions"), archive.Bytes(),
			map[string]string{"Content-Type": "application/x-tar"}, "PAYLOAD_TOO_LARGE"},
		{"a zip bomb", kpath(ns, ""), kjson(t, map[string]any{"source_uri": "bomb.xlsx", "content_base64": bomb64}), nil, kcommand.CodeTooLarge},
		{"a zip bomb beside a good document", kpath(ns, ":bulkAdd"), kjson(t, map[string]any{"documents": []map[string]any{
			{"source_uri": "good.txt", "content": "a good document refused with its batch"},
			{"source_uri": "bomb.xlsx", "content_base64": bomb64}}}), nil, kcommand.CodeTooLarge},
	}
	for _, tc := range cases {
		r := postReadingTheAnswerEarly(t, c, tc.path, tc.body, tc.headers)
		if r.Status != http.StatusRequestEntityTooLarge || r.ErrorCode() != tc.code {
			t.Errorf("%s (%d bytes sent): %d %.300s, want 413 %s", tc.what, len(tc.body), r.Status, r.Body, tc.code)
		}
	}

	if after := testenv.Generation(t, pool, org, ns); after != gen {
		t.Errorf("refused writes drew seqs: generation %d → %d", gen, after)
	}
	for _, table := range []string{"knowledge_heads", "knowledge_revisions", "knowledge_jobs"} {
		want := map[string]int64{"knowledge_heads": 1, "knowledge_revisions": 1, "knowledge_jobs": 0}[table]
		if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.`+table+` WHERE org = $1 AND namespace = $2`, org, ns); n != want {
			t.Errorf("loom.%s holds %d rows of the namespace, want %d (the document written first)", table, n, want)
		}
	}
	for _, uri := range []string{"big.txt", "bomb.xlsx", "good.txt"} {
		if r := kget(t, c, ns, uri); r.Status != http.StatusNotFound {
			t.Errorf("%s after its refusal: %d %.200s", uri, r.Status, r.Body)
		}
	}
	if r := kget(t, c, ns, "ok.txt"); r.Status != http.StatusOK {
		t.Errorf("the document written first: %d %.200s", r.Status, r.Body)
	}
}

// postReadingTheAnswerEarly posts body as c and reads the answer while the body is
// still being written. A server refusing a body by its length answers from the headers
// and closes without reading the rest, and the rest of the body then meets a reset:
// Go's client reports the reset rather than the answer it was sent first (curl shows
// the 413), so the answer is read here as it arrives and the body's write errors are
// ignored.
func postReadingTheAnswerEarly(t *testing.T, c *testenv.Client, path string, body []byte, headers map[string]string) *testenv.Response {
	t.Helper()
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	var head strings.Builder
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\nConnection: close\r\n", path, u.Host, c.Token, len(body))
	if headers["Content-Type"] == "" {
		head.WriteString("Content-Type: application/json\r\n")
	}
	for k, v := range headers {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v)
	}
	head.WriteString("\r\n")
	go func() {
		if _, err := io.WriteString(conn, head.String()); err == nil {
			conn.Write(body) // a refusal by length resets it part way
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the answer's body: %v", path, err)
	}
	return &testenv.Response{Status: resp.StatusCode, Body: answer}
}
