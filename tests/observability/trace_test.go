package observability

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// receivedSpan is a span as an OTLP/HTTP receiver got it.
type receivedSpan struct {
	service, name     string
	traceID, parentID string
	kind              tracepb.Span_SpanKind
	attrs             map[string]string
}

// otlpReceiver is an OTLP/HTTP trace receiver (protobuf) on a loopback port: what a
// collector would get from loomd.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []receivedSpan
}

func startReceiver(t testing.TB) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{url: "http://" + ln.Addr().String() + "/v1/traces"}
	srv := &http.Server{Handler: http.HandlerFunc(r.export)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

func (r *otlpReceiver) export(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a POST of application/x-protobuf to /v1/traces", http.StatusBadRequest)
		return
	}
	body := io.Reader(req.Body)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var msg coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &msg)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				attrs := map[string]string{}
				for _, kv := range s.Attributes {
					attrs[kv.Key] = kv.GetValue().GetStringValue()
				}
				r.spans = append(r.spans, receivedSpan{service: service, name: s.Name, kind: s.Kind, attrs: attrs,
					traceID: hex.EncodeToString(s.TraceId), parentID: hex.EncodeToString(s.ParentSpanId)})
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// of returns the spans received in trace traceID.
func (r *otlpReceiver) of(traceID string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if s.traceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// A write sent with a W3C traceparent is one trace from the request to every consumer:
// the request's server span is a child of the caller's span, and the commit, the
// relay's produce and the projector's and the index follower's processing of its
// record carry the same trace id, exported over OTLP/HTTP as configured by the OTEL_*
// settings. The record on the topic carries the trace context as ce_traceparent.
func TestWriteIsOneTraceAcrossThePipeline(t *testing.T) {
	recv := startReceiver(t)
	cfg, err := config.Load(func(name string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": recv.url, "OTEL_SERVICE_NAME": "loomd-trace-test",
			"OTEL_BSP_SCHEDULE_DELAY": "100"}[name]
	})
	if err != nil {
		t.Fatal(err)
	}
	n, url, _ := env.Serve(t, []string{"api", "relay", "projector"}, func(c *config.Config) { c.Tracing = cfg.Tracing })
	tc := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "traced")

	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	r := tc.DoHeaders(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/k1", []byte(`{"value":"traced through the pipeline"}`),
		map[string]string{"traceparent": "00-" + traceID + "-" + callerSpan + "-01", "tracestate": "vendor=loomtest"})
	if r.Status != http.StatusOK {
		t.Fatalf("write: %d %s", r.Status, r.Body)
	}

	topic := n.Cfg.Pipeline.Topic
	want := map[string]func(s receivedSpan) bool{
		"the request's server span, child of the caller's": func(s receivedSpan) bool {
			return s.kind == tracepb.Span_SPAN_KIND_SERVER && s.parentID == callerSpan &&
				s.name == "PUT /v1/namespaces/:ns/memories/:key" && s.service == "loomd-trace-test"
		},
		"the commit":          func(s receivedSpan) bool { return s.name == "loom.commit" },
		"the relay's produce": func(s receivedSpan) bool { return s.kind == tracepb.Span_SPAN_KIND_PRODUCER && s.name == "send "+topic },
		"the projector's process": func(s receivedSpan) bool {
			return s.kind == tracepb.Span_SPAN_KIND_CONSUMER && s.attrs["loom.consumer"] == "projector:"+n.Cfg.Pipeline.Projection
		},
		"the index's process": func(s receivedSpan) bool {
			return s.kind == tracepb.Span_SPAN_KIND_CONSUMER && s.attrs["loom.consumer"] == "index"
		},
	}
	missing := func() []string {
		spans := recv.of(traceID)
		var out []string
		for what, match := range want {
			found := false
			for _, s := range spans {
				found = found || match(s)
			}
			if !found {
				out = append(out, what)
			}
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if m := missing(); len(m) > 0 {
		t.Fatalf("trace %s lacks %s; it has %+v", traceID, strings.Join(m, ", "), recv.of(traceID))
	}

	// Another process warms its index by replaying the topic, the traced record too:
	// the replay adds no span to the write's trace.
	countIndex := func() (n int) {
		for _, s := range recv.of(traceID) {
			if s.attrs["loom.consumer"] == "index" {
				n++
			}
		}
		return n
	}
	n2, _, _ := env.Serve(t, []string{"api"}, func(c *config.Config) { c.Tracing = cfg.Tracing })
	testenv.Eventually(t, 30*time.Second, "the second process's index to warm", func() bool {
		h, ok := n2.IndexHealth()
		return ok && h.Warm
	})
	if err := n2.Tracing.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := countIndex(); got != 1 {
		t.Fatalf("the trace has %d index spans after another process's warm-up, want the one of the write's own apply", got)
	}

	var carried []string
	for _, rec := range env.TopicRecords(t) {
		for _, h := range rec.Headers {
			if h.Key == events.HeaderTraceParent && strings.Contains(string(h.Value), traceID) {
				carried = append(carried, string(h.Value))
				if ts := header(rec.Headers, events.HeaderTraceState); ts != "vendor=loomtest" {
					t.Errorf("the record's ce_tracestate is %q, want the caller's vendor=loomtest", ts)
				}
			}
		}
	}
	if len(carried) != 1 || !strings.HasPrefix(carried[0], "00-"+traceID+"-") || strings.Contains(carried[0], callerSpan) || !strings.HasSuffix(carried[0], "-01") {
		t.Fatalf("want one record whose ce_traceparent is the commit's span in trace %s, got %q", traceID, carried)
	}
}

// header is the value of a record's header named key.
func header(hs []kgo.RecordHeader, key string) string {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
