package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// roundTrips counts the statements and batches a process sends Postgres, by the trace
// of the request that sent them: each is one round trip (a batch is pipelined). A
// statement a session prepares the first time it sees it is not counted apart.
type roundTrips struct {
	mu   sync.Mutex
	sent map[trace.TraceID][]string
}

func (r *roundTrips) add(ctx context.Context, what string) {
	id := trace.SpanContextFromContext(ctx).TraceID()
	if !id.IsValid() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent == nil {
		r.sent = map[trace.TraceID][]string{}
	}
	r.sent[id] = append(r.sent[id], what)
}

func (r *roundTrips) of(id trace.TraceID) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent[id]
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(ctx, strings.Join(strings.Fields(d.SQL), " "))
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	r.add(ctx, fmt.Sprintf("a batch of %d statements", d.Batch.Len()))
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// A search pays Postgres two round trips, whatever its namespaces: one before the legs
// (the namespaces' settings, the barrier's capture, the calibration, the scope's pending
// extractions) and one after (the page's heads and, with paging, the parking of the rest
// of the pool; without it nothing is parked);
// its next page two as well (the settings with the parked pool, then the heads with the
// parking of what is left). Before, the heads of each namespace, the parking and the
// parked pool were a round trip each.
func TestASearchTakesTwoPostgresRoundTrips(t *testing.T) {
	trips := &roundTrips{}
	n, url := tracedAPI(t, trips)
	org := testenv.Unique(t, "org")
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	ns, other := testenv.Unique(t, "trips"), testenv.Unique(t, "trips2")
	c.AppendOnly(t, ns, other)
	for i := 0; i < 8; i++ {
		for _, space := range []string{ns, other} {
			typedSet(t, c, space, fmt.Sprintf("crane.%d", i), client.SetRequest{Value: fmt.Sprintf("the harbour crane %d lifts cobalt containers", i)})
		}
	}
	search := func(body map[string]any) (map[string]any, []string) {
		t.Helper()
		var id trace.TraceID
		_, _ = rand.Read(id[:])
		b, _ := json.Marshal(body)
		r := c.DoHeaders(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", b,
			map[string]string{"traceparent": "00-" + hex.EncodeToString(id[:]) + "-00f067aa0ba902b7-01"})
		if r.Status != http.StatusOK {
			t.Fatalf("search %v: %d %s", body, r.Status, r.Body)
		}
		return r.JSON(t), trips.of(id)
	}
	// The first search of a namespace settles the index's hold of it and the caches.
	search(map[string]any{"query": "harbour crane", "top_k": 3, "namespaces": []string{other}})
	for _, body := range []map[string]any{
		{"query": "cobalt containers", "top_k": 3, "paging": true},
		{"query": "cobalt containers", "top_k": 3, "namespaces": []string{other}, "paging": true},
	} {
		first, sent := search(body)
		token, _ := first["next_page_token"].(string)
		if hits, _ := first["hits"].([]any); len(hits) != 3 || token == "" {
			t.Fatalf("search %v: %d hits, next page %q", body, len(hits), token)
		}
		if len(sent) != 2 {
			t.Errorf("search %v took %d round trips, want 2: %q", body, len(sent), sent)
		}
		next, sent := search(map[string]any{"query": "cobalt containers", "top_k": 3, "page_token": token})
		if hits, _ := next["hits"].([]any); len(hits) != 3 || next["next_page_token"] == "" {
			t.Fatalf("the next page of %v: %d hits, next page %v", body, len(hits), next["next_page_token"])
		}
		if len(sent) != 2 {
			t.Errorf("the next page of %v took %d round trips, want 2: %q", body, len(sent), sent)
		}
	}
	// Without paging the page is the whole answer: no token, and no pool parked.
	pool := env.PG(t)
	parkedPools := func() int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.search_pages WHERE org = $1`, org)
	}
	before := parkedPools()
	first, _ := search(map[string]any{"query": "cobalt containers", "top_k": 3})
	if hits, _ := first["hits"].([]any); len(hits) != 3 || first["next_page_token"] != nil {
		t.Fatalf("a search without paging: %d hits, next page %v; want 3 hits and none", len(hits), first["next_page_token"])
	}
	if after := parkedPools(); after != before {
		t.Errorf("a search without paging parked its pool: %d parked pools, %d before", after, before)
	}
}

// tracedAPI is an API process whose Postgres round trips trips counts by request: a
// request's context carries its trace only with tracing on, so an OTLP sink that keeps
// nothing takes the spans.
func tracedAPI(t *testing.T, trips *roundTrips) (*app.Process, string) {
	t.Helper()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(sink.Close)
	traced, err := config.Load(func(name string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": sink.URL + "/v1/traces"}[name]
	})
	if err != nil {
		t.Fatal(err)
	}
	return env.API(t, func(c *config.Config) { c.Tracing = traced.Tracing }, app.WithPGTracer(trips))
}
