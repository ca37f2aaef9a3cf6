package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
)

// recorded is one request the fake server saw.
type recorded struct {
	method, rawPath, query, idemKey, auth string
	body                                  string
}

// fake answers each request with the next of its answers (the last one repeats) and
// records what it was sent.
type fake struct {
	mu      sync.Mutex
	seen    []recorded
	answers []fakeAnswer
}

type fakeAnswer struct {
	status int
	header map[string]string
	body   string
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	raw := r.URL.RawPath
	if raw == "" {
		raw = r.URL.Path
	}
	f.seen = append(f.seen, recorded{r.Method, raw, r.URL.RawQuery, r.Header.Get("Idempotency-Key"), r.Header.Get("Authorization"), string(b)})
	a := f.answers[min(len(f.seen)-1, len(f.answers)-1)]
	f.mu.Unlock()
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

func serve(t *testing.T, answers ...fakeAnswer) (*fake, string) {
	t.Helper()
	f := &fake{answers: answers}
	s := httptest.NewServer(f)
	t.Cleanup(s.Close)
	return f, s.URL
}

func newClient(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, "loom_abc_secret", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const setOK = `{"memory_id":"0b8e6f3c-4c1e-4d52-9a7e-2f0f3a1f5e11","namespace":"support","memory_key":"k","agent":"-","user_id":"-","session_id":"-",
 "version":1773480413589793238,"version_text":"1773480413589793238","seq":42,"content_sha256":"9f86","reinforcement_count":0,
 "event":"memory.written","written":true,"verdict":"new","status":"active","memory_type":"fact","sensitivity":"normal","pinned":false,"peers":[]}`

func TestSetSendsTheBodyAndDecodesTheAnswer(t *testing.T) {
	f, url := serve(t, fakeAnswer{status: 200, body: setOK})
	c := newClient(t, url)
	conf := 0.5
	a, err := c.Set(context.Background(), "support", "dir/a:b", client.SetRequest{
		Value: map[string]any{"theme": "dark"}, Identity: client.Identity{UserID: "alice"},
		Tags: []string{}, Confidence: &conf, Entities: []client.Entity{{Name: "Paris"}, {Name: "Ada", Type: "person"}},
	}, client.IdempotencyKey("key-1"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Version != 1773480413589793238 || a.VersionText != "1773480413589793238" || !a.Written || a.Verdict != "new" || a.Seq != 42 {
		t.Fatalf("answer decoded as %+v", a)
	}
	r := f.seen[0]
	if r.method != http.MethodPut || r.rawPath != "/v1/namespaces/support/memories/dir%2Fa%3Ab" {
		t.Errorf("sent %s %s, want PUT with the key's / and : escaped", r.method, r.rawPath)
	}
	if r.idemKey != "key-1" || r.auth != "Bearer loom_abc_secret" {
		t.Errorf("headers: Idempotency-Key %q, Authorization %q", r.idemKey, r.auth)
	}
	var body map[string]any
	json.Unmarshal([]byte(r.body), &body)
	want := `{"confidence":0.5,"entities":["Paris",{"name":"Ada","type":"person"}],"tags":[],"user_id":"alice","value":{"theme":"dark"}}`
	if got, _ := json.Marshal(body); string(got) != want {
		t.Errorf("body %s, want %s (empty tags sent as [], nil fields left out, an untyped entity as its name)", got, want)
	}
}

func TestErrorEnvelopeIsATypedError(t *testing.T) {
	_, url := serve(t, fakeAnswer{status: 503, header: map[string]string{"Retry-After": "2"},
		body: `{"error":{"code":"PROJECTION_BEHIND","message":"behind","retryable":true,"namespace":"support","generation":42,"watermark":40}}`})
	_, err := newClient(t, url).Search(context.Background(), "support", client.SearchRequest{Query: "tea"})
	e, ok := client.AsError(err)
	if !ok {
		t.Fatalf("error %v is not a *client.Error", err)
	}
	if e.Status != 503 || e.Code != client.CodeProjectionBehind || !e.Retryable || e.RetryAfter != 2*time.Second ||
		e.Namespace != "support" || e.Generation != 42 || e.Watermark != 40 {
		t.Errorf("error decoded as %+v", e)
	}
	if !client.IsCode(err, client.CodeProjectionBehind) || !strings.Contains(err.Error(), "PROJECTION_BEHIND") {
		t.Errorf("IsCode/Error(): %v", err)
	}
}

func TestValidationErrorNamesItsField(t *testing.T) {
	_, url := serve(t, fakeAnswer{status: 422, body: `{"error":{"code":"VALIDATION_FAILED","message":"must be between 0 and 1, got 2","retryable":false,"field":"confidence"}}`})
	_, err := newClient(t, url, client.WithRetry(client.Retry{InitialInterval: time.Millisecond})).Set(context.Background(), "ns", "k", client.SetRequest{Value: "x"})
	e, _ := client.AsError(err)
	if e == nil || e.Field != "confidence" || e.Retryable || e.RetryAfter != 0 {
		t.Fatalf("got %+v", e)
	}
}

func TestRetryRetriesRetryableErrorsWithTheSameKey(t *testing.T) {
	busy := fakeAnswer{status: 503, body: `{"error":{"code":"ADMISSION_CONTENDED","message":"retry","retryable":true}}`}
	f, url := serve(t, busy, busy, fakeAnswer{status: 200, body: setOK})
	var retries int
	c := newClient(t, url, client.WithRetry(client.Retry{InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond,
		IdempotentWrites: true, OnRetry: func(error, time.Duration) { retries++ }}))
	a, err := c.Set(context.Background(), "ns", "k", client.SetRequest{Value: "x"})
	if err != nil || !a.Written {
		t.Fatalf("set: %v %+v", err, a)
	}
	if len(f.seen) != 3 || retries != 2 {
		t.Fatalf("sent %d times, %d retries; want 3 and 2", len(f.seen), retries)
	}
	if k := f.seen[0].idemKey; k == "" || f.seen[1].idemKey != k || f.seen[2].idemKey != k {
		t.Errorf("Idempotency-Keys %q %q %q: want one generated key on every attempt", f.seen[0].idemKey, f.seen[1].idemKey, f.seen[2].idemKey)
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	busy := fakeAnswer{status: 503, body: `{"error":{"code":"POSTGRES_UNAVAILABLE","message":"retry","retryable":true,"retry_after_s":1}}`}
	_, url := serve(t, busy, fakeAnswer{status: 200, body: `{"hits":[],"verdict":"no_match","stale_dropped":0,"mode":"weighted","namespaces":["ns"],"barrier":{"generations":{"ns":0},"waited_ms":0}}`})
	var waits []time.Duration
	c := newClient(t, url, client.WithRetry(client.Retry{InitialInterval: time.Millisecond, OnRetry: func(_ error, d time.Duration) { waits = append(waits, d) }}))
	a, err := c.Search(context.Background(), "ns", client.SearchRequest{Query: "q"})
	if err != nil || !a.Abstain() {
		t.Fatalf("search: %v %+v", err, a)
	}
	if len(waits) != 1 || waits[0] < time.Second {
		t.Errorf("waited %v, want one wait of at least the server's 1 s", waits)
	}
}

func TestRetryLeavesRefusalsAndUnknownOutcomesAlone(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		opts       []client.CallOption
		sends      int
	}{
		{"a refusal", `{"error":{"code":"PINNED_CONFLICT","message":"pinned","retryable":false}}`, nil, 1},
		{"an unknown outcome without a key", `{"error":{"code":"POSTGRES_UNAVAILABLE","message":"lost","retryable":true,"outcome_unknown":true}}`, nil, 1},
		{"an unknown outcome under a key", `{"error":{"code":"POSTGRES_UNAVAILABLE","message":"lost","retryable":true,"outcome_unknown":true}}`,
			[]client.CallOption{client.IdempotencyKey("k1")}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, url := serve(t, fakeAnswer{status: 409, body: tc.body})
			c := newClient(t, url, client.WithRetry(client.Retry{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, MaxAttempts: 3}))
			_, err := c.Set(context.Background(), "ns", "k", client.SetRequest{Value: "x"}, tc.opts...)
			if _, ok := client.AsError(err); !ok {
				t.Fatalf("error %v", err)
			}
			if len(f.seen) != tc.sends {
				t.Errorf("sent %d times, want %d", len(f.seen), tc.sends)
			}
		})
	}
}

func TestCommittedReplayStandsInForTheAnswer(t *testing.T) {
	_, url := serve(t, fakeAnswer{status: 200, header: map[string]string{"Idempotent-Replay": "true"},
		body: `{"idempotent_replay":"committed","written":[{"memory_id":"m1","memory_key":"k","version":7,"version_text":"7","content_sha256":"ab"}],"memory_id":"m1","memory_key":"k","version":7,"version_text":"7","content_sha256":"ab"}`})
	a, err := newClient(t, url).Set(context.Background(), "ns", "k", client.SetRequest{Value: "x"}, client.IdempotencyKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Replayed || a.Committed == nil || len(a.Committed.Written) != 1 || a.Committed.Written[0].Version != 7 {
		t.Fatalf("replay decoded as %+v / %+v", a.Replay, a.Committed)
	}
}

func TestListSendsItsFilters(t *testing.T) {
	f, url := serve(t, fakeAnswer{status: 200, body: `{"memories":[],"barrier":{"generations":{"ns":3},"waited_ms":1}}`})
	a, err := newClient(t, url).List(context.Background(), "ns", client.ListOptions{Order: "key", Limit: 20,
		Identity: client.Identity{UserID: "alice"}, Tags: []string{"a", "b"}, Status: []string{"active"}})
	if err != nil || a.Barrier.Generations["ns"] != 3 {
		t.Fatalf("list: %v %+v", err, a)
	}
	if q := f.seen[0].query; q != "limit=20&order=key&status=active&tags=a%2Cb&user_id=alice" {
		t.Errorf("query %q", q)
	}
}

func TestTransportFailureOfAReadIsRetriedNotOfAWrite(t *testing.T) {
	c := newClient(t, "http://127.0.0.1:1", client.WithRetry(client.Retry{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, MaxAttempts: 3,
		OnRetry: func(error, time.Duration) {}}))
	var retried int
	c2 := newClient(t, "http://127.0.0.1:1", client.WithRetry(client.Retry{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, MaxAttempts: 3,
		OnRetry: func(error, time.Duration) { retried++ }}))
	if _, err := c2.Get(context.Background(), "ns", "k", client.Identity{}, time.Time{}); err == nil {
		t.Fatal("want a transport error")
	}
	if retried != 2 {
		t.Errorf("a read was retried %d times, want 2", retried)
	}
	retried = 0
	c2.Set(context.Background(), "ns", "k", client.SetRequest{Value: "x"})
	if retried != 0 {
		t.Errorf("a write without a key was retried %d times after a transport failure", retried)
	}
	_, err := c.Get(context.Background(), "ns", "k", client.Identity{}, time.Time{})
	if _, ok := client.AsError(err); ok || err == nil {
		t.Errorf("a transport failure is %v, want a plain error", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Error("not a cancellation")
	}
}

func TestReadyAnswersNotReadyWithoutAnError(t *testing.T) {
	_, url := serve(t, fakeAnswer{status: 503, body: `{"ready":false,"checks":{"postgres":"ok","clickhouse":"dial tcp: refused"},"pending_migrations":[]}`})
	r, err := newClient(t, url).Ready(context.Background())
	if err != nil || r.Ready || r.Checks.ClickHouse != "dial tcp: refused" {
		t.Fatalf("ready: %v %+v", err, r)
	}
}

func TestNewRefusesABadURL(t *testing.T) {
	for _, u := range []string{"", "localhost:8080", "ftp://x"} {
		if _, err := client.New(u, "t"); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

func TestErrorOfReadsARawAnswer(t *testing.T) {
	if client.ErrorOf(200, []byte(`{}`)) != nil {
		t.Error("a 200 is no error")
	}
	e, ok := client.AsError(client.ErrorOf(422, []byte(`{"error":{"code":"VALIDATION_FAILED","message":"m","retryable":false,"field":"tags"}}`)))
	if !ok || e.Status != 422 || e.Code != client.CodeValidationFailed || e.Field != "tags" {
		t.Errorf("ErrorOf answered %+v", e)
	}
}

// A process that warmed from a checkpoint reports it in health's index object; a
// strict client reads every field of it.
func TestHealthOfAnIndexWarmedFromACheckpointDecodesStrictly(t *testing.T) {
	_, url := serve(t, fakeAnswer{status: 200, body: `{"status":"ok","roles":["query"],"index":{"warm":true,
		"target_records":10,"applied_records":10,"warm_percent":100,"records_behind":0,"started_at":"2026-12-02T06:00:00Z",
		"warm_at":"2026-12-02T06:00:01Z","warm_seconds":1,"namespaces":1,"namespaces_held":1,"entries":3,"vectors":3,
		"bytes":2048,"budget_bytes":0,"evicted_namespaces":0,"undecodable_records":0,"unopenable_records":0,
		"last_applied_seconds_ago":2,"restored_entries":3,"restored_records":7,"checkpoint_refused":"",
		"checkpoints_written":2,"checkpoint_bytes":1700,"checkpoint_at":"2026-12-02T06:00:02Z","checkpoint_failures":1}}`})
	h, err := newClient(t, url, client.WithStrictDecoding()).Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if x := h.Index; x == nil || x.RestoredEntries != 3 || x.RestoredRecords != 7 || x.CheckpointsWritten != 2 ||
		x.CheckpointBytes != 1700 || x.CheckpointAt.IsZero() || x.CheckpointFailures != 1 {
		t.Fatalf("index decoded as %+v", h.Index)
	}
}
