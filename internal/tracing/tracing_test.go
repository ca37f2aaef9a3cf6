package tracing

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomplane/loom/events"
)

// A commit's trace context survives the trip through a record's headers: the
// consumer's span is in the same trace, a child of the commit's span.
func TestRecordCarriesTheCommitsTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tp.Tracer("test")
	ctx, commit := tr.Start(context.Background(), "loom.commit")
	tparent, tstate := Context(ctx)
	commit.End()
	r := &kgo.Record{Topic: "t"}
	for _, h := range events.TraceHeaders(tparent, tstate) {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	spans := StartProcess(context.Background(), tr, "index", []*kgo.Record{r, {Topic: "t"}})
	spans.EndAll(nil)
	ended := rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("want the commit's span and one processing span (the untraced record has none), got %d", len(ended))
	}
	p := ended[1]
	if p.SpanContext().TraceID() != commit.SpanContext().TraceID() || p.Parent().SpanID() != commit.SpanContext().SpanID() || p.SpanKind() != trace.SpanKindConsumer {
		t.Fatalf("processing span %v (parent %v), want a consumer child of the commit %v", p.SpanContext(), p.Parent(), commit.SpanContext())
	}
	if off, _ := Context(context.Background()); off != "" {
		t.Fatalf("no span, yet a traceparent %q", off)
	}
}

// What the write path and a consumer's batch pay for tracing: off (the no-op
// provider every role holds without an OTLP endpoint) and on (the SDK, spans sampled,
// a processor that drops them).
func BenchmarkCommitSpan(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run("tracing="+mode, func(b *testing.B) {
			tr := tracerFor(mode)
			ctx := context.Background()
			for b.Loop() {
				// As command.Service.commit: nothing at all when off.
				if !On(tr) {
					continue
				}
				cctx, span := tr.Start(ctx, "loom.commit")
				tp, ts := Context(cctx)
				_ = events.TraceHeaders(tp, ts)
				span.End()
			}
		})
	}
}

func BenchmarkProcessBatch(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run("tracing="+mode+"/records=1000", func(b *testing.B) {
			tr := tracerFor(mode)
			ctx, span := tracerFor("on").Start(context.Background(), "w")
			tp, _ := Context(ctx)
			span.End()
			recs := make([]*kgo.Record, 1000)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: "t", Headers: []kgo.RecordHeader{{Key: "ce_id", Value: fmt.Appendf(nil, "a/b/%d", i)},
					{Key: events.HeaderTraceParent, Value: []byte(tp)}}}
			}
			for b.Loop() {
				StartProcess(context.Background(), tr, "index", recs).EndAll(nil)
			}
		})
	}
}

func tracerFor(mode string) trace.Tracer {
	if mode == "off" {
		return Tracer(nil)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample())).Tracer("bench")
}
