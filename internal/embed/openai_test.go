package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/llm/llmtest"
)

// fakeProvider is an OpenAI-compatible embeddings server. Each input text
// "v:a,b,c" embeds as the vector [a b c]; any other text as [len(text) 1].
type fakeProvider struct {
	// reverse answers data in reverse order, as a provider may.
	reverse bool
	// status, when set, is returned with body instead of embeddings.
	status int
	body   string

	mu       sync.Mutex
	requests []map[string]any
	headers  []http.Header
}

func (f *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
	if f.status != 0 {
		w.WriteHeader(f.status)
		fmt.Fprint(w, f.body)
		return
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	var data []item
	for i, in := range req["input"].([]any) {
		text := in.(string)
		var vec []float64
		if nums, ok := strings.CutPrefix(text, "v:"); ok {
			for _, s := range strings.Split(nums, ",") {
				var x float64
				fmt.Sscan(s, &x)
				vec = append(vec, x)
			}
		} else {
			vec = []float64{float64(len(text)), 1}
		}
		data = append(data, item{Object: "embedding", Index: i, Embedding: vec})
	}
	if f.reverse {
		for i, j := 0, len(data)-1; i < j; i, j = i+1, j-1 {
			data[i], data[j] = data[j], data[i]
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req["model"]})
}

func newProvider(t *testing.T, f *fakeProvider) *httptest.Server {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv
}

func mustOpenAI(t *testing.T, cfg OpenAIConfig) *OpenAI {
	t.Helper()
	e, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestOpenAIRequestShape(t *testing.T) {
	f := &fakeProvider{}
	srv := newProvider(t, f)
	e := mustOpenAI(t, OpenAIConfig{BaseURL: srv.URL + "/", APIKey: "sk-test", Model: "text-embedding-3-small", Dim: 3})
	if _, err := e.Embed(context.Background(), []string{"v:1,0,0", "v:0,1,0"}); err != nil {
		t.Fatal(err)
	}
	if len(f.requests) != 1 {
		t.Fatalf("%d requests, want 1", len(f.requests))
	}
	got, _ := json.Marshal(f.requests[0])
	want := `{"dimensions":3,"encoding_format":"base64","input":["v:1,0,0","v:0,1,0"],"model":"text-embedding-3-small"}`
	if string(got) != want {
		t.Fatalf("request body %s, want %s", got, want)
	}
	h := f.headers[0]
	if h.Get("Authorization") != "Bearer sk-test" || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		t.Fatalf("headers Authorization=%q Content-Type=%q", h.Get("Authorization"), h.Get("Content-Type"))
	}
}

// The client asks for base64 vectors, which decode for a fraction of JSON numbers'
// cost, and reads the same vectors from a server that answers base64 (llmtest, as
// OpenAI) as from one that ignores the format and sends numbers (fakeProvider, above).
func TestOpenAIAsksForBase64Vectors(t *testing.T) {
	srv := llmtest.New(t)
	e := mustOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m", Dim: 8})
	texts := []string{"alder lives in quill", "fact 7"}
	got, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if f := srv.Requests()[0].Embed.EncodingFormat; f != "base64" {
		t.Fatalf("encoding_format %q, want base64", f)
	}
	for i, text := range texts {
		want := llmtest.Vector(text, 8)
		for j := range want {
			if math.Abs(float64(got[i][j])-want[j]) > 1e-6 {
				t.Fatalf("text %d: vector %v, want %v", i, got[i], want)
			}
		}
	}
}

func TestOpenAIOmitsDimensionsWhenUnset(t *testing.T) {
	f := &fakeProvider{}
	srv := newProvider(t, f)
	// A base URL in the SDK style, ending in /v1, reaches the same endpoint.
	e := mustOpenAI(t, OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m"})
	if _, err := e.Embed(context.Background(), []string{"v:1,2"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.requests[0]["dimensions"]; ok {
		t.Fatalf("request %v sends dimensions though none is configured", f.requests[0])
	}
	if f.headers[0].Get("Authorization") != "" {
		t.Fatal("Authorization sent without an API key")
	}
}

func TestOpenAIReordersByIndexAndNormalises(t *testing.T) {
	f := &fakeProvider{reverse: true}
	srv := newProvider(t, f)
	e := mustOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m", Dim: 2})
	vs, err := e.Embed(context.Background(), []string{"v:3,4", "v:0,2", "v:-5,0"})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{0.6, 0.8}, {0, 1}, {-1, 0}}
	for i := range want {
		for j := range want[i] {
			if math.Abs(float64(vs[i][j]-want[i][j])) > 1e-6 {
				t.Fatalf("vector %d = %v, want %v (input order, normalised)", i, vs[i], want[i])
			}
		}
	}
}

func TestOpenAIDimensionMismatch(t *testing.T) {
	f := &fakeProvider{}
	srv := newProvider(t, f)
	e := mustOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m", Dim: 3})
	_, err := e.Embed(context.Background(), []string{"v:1,2"})
	if err == nil || !strings.Contains(err.Error(), "has 2 dimensions, want 3") {
		t.Fatalf("err = %v, want a dimension mismatch", err)
	}
	if errors.Is(err, ErrEmbedderUnavailable) {
		t.Fatal("a dimension mismatch is not a transient failure")
	}
}

func TestOpenAILearnsDimension(t *testing.T) {
	f := &fakeProvider{}
	srv := newProvider(t, f)
	e := mustOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m"})
	if e.Dim() != 0 {
		t.Fatalf("Dim before any call = %d, want 0", e.Dim())
	}
	if _, err := e.Embed(context.Background(), []string{"v:1,2,3"}); err != nil {
		t.Fatal(err)
	}
	if e.Dim() != 3 {
		t.Fatalf("Dim after a 3-vector = %d, want 3", e.Dim())
	}
	if _, err := e.Embed(context.Background(), []string{"v:1,2"}); err == nil || !strings.Contains(err.Error(), "want 3") {
		t.Fatalf("a later 2-vector: err = %v, want a mismatch against the learned 3", err)
	}
	if _, err := e.Embed(context.Background(), []string{"v:1,2,3", "v:1,2"}); err == nil {
		t.Fatal("a batch of mixed dimensions succeeded")
	}
}

func TestOpenAIErrors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		retryable bool
		mention   string
	}{
		{"server error", 500, `{"error":{"message":"upstream overloaded","type":"server_error"}}`, true, "upstream overloaded"},
		{"rate limited", 429, `{"error":{"message":"Rate limit reached","type":"requests"}}`, true, "Rate limit reached"},
		{"bad gateway plain text", 502, "<html>bad gateway</html>", true, "bad gateway"},
		{"bad request", 400, `{"error":{"message":"'input' is too long","type":"invalid_request_error"}}`, false, "'input' is too long"},
		{"unauthorized", 401, `{"error":{"message":"Incorrect API key provided"}}`, false, "Incorrect API key"},
		{"string error", 404, `{"error":"model not found"}`, false, "model not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newProvider(t, &fakeProvider{status: tt.status, body: tt.body})
			e := mustOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m"})
			_, err := e.Embed(context.Background(), []string{"hello"})
			if err == nil {
				t.Fatal("Embed succeeded on an error response")
			}
			if got := errors.Is(err, ErrEmbedderUnavailable); got != tt.retryable {
				t.Errorf("errors.Is(err, ErrEmbedderUnavailable) = %v, want %v (err: %v)", got, tt.retryable, err)
			}
			for _, want := range []string{fmt.Sprint(tt.status), tt.mention} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestOpenAIUnreachableIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	e := mustOpenAI(t, OpenAIConfig{BaseURL: url, Model: "m"})
	if _, err := e.Embed(context.Background(), []string{"x"}); !errors.Is(err, ErrEmbedderUnavailable) {
		t.Fatalf("err = %v, want ErrEmbedderUnavailable for a refused connection", err)
	}
}

func TestOpenAITimeoutIsRetryable(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	e := mustOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m", Timeout: 50 * time.Millisecond})
	if _, err := e.Embed(context.Background(), []string{"x"}); !errors.Is(err, ErrEmbedderUnavailable) {
		t.Fatalf("err = %v, want ErrEmbedderUnavailable when the provider is too slow", err)
	}

	// The caller cancelling is not the provider's fault.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	e = mustOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m"})
	_, err := e.Embed(ctx, []string{"x"})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrEmbedderUnavailable) {
		t.Fatalf("err = %v, want the caller's deadline and not ErrEmbedderUnavailable", err)
	}
}

func TestOpenAIBatching(t *testing.T) {
	f := &fakeProvider{reverse: true}
	srv := newProvider(t, f)
	e := mustOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m", BatchSize: 2})
	texts := []string{"a", "bb", "ccc", "dddd", "eeeee"}
	vs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	var sent []string
	for _, r := range f.requests {
		in := r["input"].([]any)
		sizes = append(sizes, len(in))
		for _, s := range in {
			sent = append(sent, s.(string))
		}
	}
	if fmt.Sprint(sizes) != "[2 2 1]" || strings.Join(sent, " ") != strings.Join(texts, " ") {
		t.Fatalf("batches of %v sending %v, want [2 2 1] sending %v in order", sizes, sent, texts)
	}
	// Each text embeds as [len, 1]; vectors must line up with their text
	// across batch boundaries.
	for i, text := range texts {
		n := float64(len(text))
		want0 := n / math.Sqrt(n*n+1)
		if len(vs[i]) != 2 || math.Abs(float64(vs[i][0])-want0) > 1e-6 {
			t.Fatalf("vector %d = %v, want the one for %q", i, vs[i], text)
		}
	}
}

func TestOpenAIDefaultBatchSize(t *testing.T) {
	f := &fakeProvider{}
	srv := newProvider(t, f)
	e := mustOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m"})
	texts := make([]string, 300)
	for i := range texts {
		texts[i] = "t"
	}
	if _, err := e.Embed(context.Background(), texts); err != nil {
		t.Fatal(err)
	}
	if len(f.requests) != 2 || len(f.requests[0]["input"].([]any)) != 256 {
		t.Fatalf("300 texts went in %d requests, want 256 + 44", len(f.requests))
	}
	if vs, err := e.Embed(context.Background(), nil); err != nil || len(vs) != 0 || len(f.requests) != 2 {
		t.Fatalf("no texts: %v, %v, %d requests; want no call", vs, err, len(f.requests))
	}
}

func TestOpenAIBadResponses(t *testing.T) {
	for name, body := range map[string]string{
		"too few":         `{"data":[{"index":0,"embedding":[1,0]}]}`,
		"index repeated":  `{"data":[{"index":0,"embedding":[1,0]},{"index":0,"embedding":[0,1]}]}`,
		"index too large": `{"data":[{"index":0,"embedding":[1,0]},{"index":2,"embedding":[0,1]}]}`,
		"empty vector":    `{"data":[{"index":0,"embedding":[]},{"index":1,"embedding":[0,1]}]}`,
		"not JSON":        `<html>ok</html>`,
	} {
		t.Run(name, func(t *testing.T) {
			srv := newProvider(t, &fakeProvider{status: 200, body: body})
			e := mustOpenAI(t, OpenAIConfig{BaseURL: srv.URL, Model: "m"})
			if vs, err := e.Embed(context.Background(), []string{"a", "b"}); err == nil {
				t.Fatalf("Embed accepted %s: %v", body, vs)
			}
		})
	}
}

func TestNewOpenAIValidates(t *testing.T) {
	for name, cfg := range map[string]OpenAIConfig{
		"no model":     {BaseURL: "http://x"},
		"negative dim": {BaseURL: "http://x", Model: "m", Dim: -1},
		"no scheme":    {BaseURL: "api.example.com", Model: "m"},
		"blank model":  {Model: "  "},
		"ftp base url": {BaseURL: "ftp://x", Model: "m"},
	} {
		if _, err := NewOpenAI(cfg); err == nil {
			t.Errorf("%s: NewOpenAI(%+v) succeeded", name, cfg)
		}
	}
}
