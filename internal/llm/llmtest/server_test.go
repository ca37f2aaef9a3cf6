package llmtest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps what the server reports, so a test can check
// that a script error fails the test it belongs to.
type recorder struct {
	testing.TB
	errs     []string
	cleanups []func()
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) finish() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func post(t *testing.T, url string, body any) (int, map[string]any, http.Header) {
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out, res.Header
}

func chatBody(schema map[string]any) map[string]any {
	return map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "s", "strict": true, "schema": schema}}}
}

var objectSchema = map[string]any{"type": "object", "additionalProperties": false, "required": []any{"n"},
	"properties": map[string]any{"n": map[string]any{"type": "integer"}}}

func TestAScriptThatBreaksTheSchemaFailsItsTest(t *testing.T) {
	rec := &recorder{TB: t}
	s := New(rec)
	s.Reply(JSON(map[string]any{"n": "not a number"}))
	status, _, _ := post(t, s.URL+"/chat/completions", chatBody(objectSchema))
	rec.finish()
	if status != 500 || len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "does not match the request's schema") {
		t.Fatalf("status %d, reported %q: want a 500 and the test failed", status, rec.errs)
	}
}

func TestAnUnscriptedRequestFailsItsTest(t *testing.T) {
	rec := &recorder{TB: t}
	s := New(rec)
	status, _, _ := post(t, s.URL+"/chat/completions", chatBody(objectSchema))
	rec.finish()
	if status != 500 || len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "unscripted") {
		t.Fatalf("status %d, reported %q", status, rec.errs)
	}
}

func TestASchemaStrictModeRefusesIsRefusedAsOpenAIDoes(t *testing.T) {
	s := New(t)
	loose := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}
	status, body, _ := post(t, s.URL+"/chat/completions", chatBody(loose))
	msg, _ := body["error"].(map[string]any)["message"].(string)
	if status != 400 || !strings.Contains(msg, "Invalid schema") {
		t.Fatalf("status %d %v", status, body)
	}
}

func TestQueuedRepliesMatchByPredicateAndErrorsCarryRetryAfter(t *testing.T) {
	s := New(t)
	s.ReplyWhen(func(r ChatRequest) bool { return r.Contains("second") }, JSON(map[string]any{"n": 2}))
	s.Reply(Status(429, "slow down").WithRetryAfter(1500*time.Millisecond), JSON(map[string]any{"n": 1}))
	ask := func(text string) (int, map[string]any, http.Header) {
		b := chatBody(objectSchema)
		b["messages"] = []any{map[string]any{"role": "user", "content": text}}
		return post(t, s.URL+"/chat/completions", b)
	}
	if status, _, h := ask("first"); status != 429 || h.Get("Retry-After") != "2" || h.Get("Retry-After-Ms") != "1500" {
		t.Fatalf("first: %d %v", status, h)
	}
	_, body, _ := ask("second")
	content := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]
	if content != `{"n":2}` {
		t.Fatalf("second got %v, want the answer its predicate picked", content)
	}
	_, body, _ = ask("first again")
	usage := body["usage"].(map[string]any)
	if c := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; c != `{"n":1}` || usage["total_tokens"].(float64) <= 0 {
		t.Fatalf("third got %v %v", c, usage)
	}
	if r := s.Requests(); len(r) != 3 || r[0].Status != 429 || r[1].Chat.Text() != "second\n" {
		t.Fatalf("record %+v", r)
	}
}

// Only tests import llmtest: the module's non-test code outside tests/ never does,
// but for bench/, whose extract scenario measures Loom's pipeline against it (a
// model's own time would drown what the benchmark measures).
func TestOnlyTestsImportTheScriptedServer(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	const self = "github.com/loomplane/loom/internal/llm/llmtest"
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".loom", "node_modules", "tests", "bench":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == self {
				t.Errorf("%s imports llmtest; only tests may", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the walk did not start at the module root: %v", err)
	}
}

// A base64 embedding is the little-endian float32s of the vector the server sends as
// numbers to a request that asks for floats.
func TestEmbeddingsAnswerBase64AsOpenAIDoes(t *testing.T) {
	s := New(t)
	input := []any{"alder lives in quill", "fact 7"}
	_, floats, _ := post(t, s.URL+"/embeddings", map[string]any{"model": "m", "input": input, "dimensions": 8, "encoding_format": "float"})
	_, b64, _ := post(t, s.URL+"/embeddings", map[string]any{"model": "m", "input": input, "dimensions": 8, "encoding_format": "base64"})
	for i := range input {
		nums := floats["data"].([]any)[i].(map[string]any)["embedding"].([]any)
		enc, ok := b64["data"].([]any)[i].(map[string]any)["embedding"].(string)
		if !ok {
			t.Fatalf("input %d: a base64 request was answered %T, want a string", i, b64["data"].([]any)[i].(map[string]any)["embedding"])
		}
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(raw) != 4*len(nums) {
			t.Fatalf("input %d: %d bytes (%v) for %d numbers", i, len(raw), err, len(nums))
		}
		for j, n := range nums {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])); got != float32(n.(float64)) {
				t.Fatalf("input %d, entry %d: base64 %v, numbers %v", i, j, got, n)
			}
		}
	}
	reqs := s.Requests()
	if reqs[0].Embed.EncodingFormat != "float" || reqs[1].Embed.EncodingFormat != "base64" {
		t.Fatalf("recorded formats %q, %q", reqs[0].Embed.EncodingFormat, reqs[1].Embed.EncodingFormat)
	}
}

// BenchmarkEmbeddingsAnswer is the server's own cost of one peers-scenario embeddings
// request (two inputs, 256 dimensions), without the network: what every system under
// test pays alike.
func BenchmarkEmbeddingsAnswer(b *testing.B) {
	for _, format := range []string{"float", "base64"} {
		b.Run(format, func(b *testing.B) {
			s := New(b)
			body, _ := json.Marshal(map[string]any{"model": "m", "input": []string{"alder brook lives in the harbour town of quill", "fact 123"},
				"dimensions": 256, "encoding_format": format})
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, "/v1/embeddings", bytes.NewReader(body))
				w := httptest.NewRecorder()
				s.serve(w, req)
				if w.Code != http.StatusOK {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
