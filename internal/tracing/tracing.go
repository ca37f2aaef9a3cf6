// Package tracing is the process's OpenTelemetry tracer and the trace context a
// revision carries from the request that wrote it to whatever consumes it: in the
// outbox row's headers and the Kafka record's, as the CloudEvents distributed-tracing
// extension binds it in the Kafka binary mode (ce_traceparent, ce_tracestate; W3C
// Trace Context values). So the relay's produce span and the projector's and the index
// follower's consume spans join the trace of the request that wrote the record.
//
// Off (no OTLP endpoint configured), the provider is OpenTelemetry's no-op: spans cost
// a call that returns at once and records carry no trace context.
package tracing

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/config"
)

// Provider is a process's tracer provider and how to flush it.
type Provider struct {
	trace.TracerProvider
	sdk *sdktrace.TracerProvider // nil: tracing is off
}

// New builds the provider cfg describes: an OTLP/HTTP exporter behind a batch span
// processor, or the no-op provider when tracing is off.
func New(ctx context.Context, cfg config.Tracing) (*Provider, error) {
	if !cfg.On() {
		return Off(), nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint))
	if err != nil {
		return nil, fmt.Errorf("start the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithAttributes(attribute.String("service.name", cfg.ServiceName)))
	if err != nil {
		return nil, fmt.Errorf("describe the process for its traces: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(cfg.ExportDelay)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler(cfg)),
	)
	return &Provider{TracerProvider: sdk, sdk: sdk}, nil
}

// Off is the no-op provider.
func Off() *Provider { return &Provider{TracerProvider: noop.NewTracerProvider()} }

// Shutdown exports the spans still buffered and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// Flush exports the spans ended so far.
func (p *Provider) Flush(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

func sampler(cfg config.Tracing) sdktrace.Sampler {
	var s sdktrace.Sampler
	switch strings.TrimPrefix(cfg.Sampler, "parentbased_") {
	case "always_off":
		s = sdktrace.NeverSample()
	case "traceidratio":
		s = sdktrace.TraceIDRatioBased(cfg.SamplerArg)
	default:
		s = sdktrace.AlwaysSample()
	}
	if strings.HasPrefix(cfg.Sampler, "parentbased_") {
		return sdktrace.ParentBased(s)
	}
	return s
}

// Tracer returns t, or the no-op tracer when t is nil: a role built without one (a
// test, a tool) traces nothing.
func Tracer(t trace.Tracer) trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer("")
	}
	return t
}

// On reports whether t records anything: consumers skip reading a record's trace
// context when it does not.
func On(t trace.Tracer) bool {
	_, off := t.(noop.Tracer)
	return t != nil && !off
}

// W3C is the propagator of the traceparent and tracestate headers.
var W3C = propagation.TraceContext{}

// Context returns the trace context of ctx's span as the values of a record's
// ce_traceparent and ce_tracestate headers; "" when ctx has no sampled span (tracing
// off, or not sampled).
func Context(ctx context.Context) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	W3C.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}

// FromHeaders returns ctx with the remote span context the headers carry, header
// reading the value of a header by its name (ce_traceparent, ce_tracestate).
func FromHeaders(ctx context.Context, header func(name string) string) context.Context {
	tp := header(events.HeaderTraceParent)
	if tp == "" {
		return ctx
	}
	return W3C.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": header(events.HeaderTraceState)})
}

// FromRecord is FromHeaders over a Kafka record's headers.
func FromRecord(ctx context.Context, rec *kgo.Record) context.Context {
	return FromHeaders(ctx, func(name string) string {
		for _, h := range rec.Headers {
			if h.Key == name {
				return string(h.Value)
			}
		}
		return ""
	})
}

// Messaging attributes of the spans over the topic (OpenTelemetry's messaging
// conventions), and the consumer that processed a record.
var (
	attrKafka    = attribute.String("messaging.system", "kafka")
	attrSend     = attribute.String("messaging.operation.type", "send")
	attrProcess  = attribute.String("messaging.operation.type", "process")
	keyTopic     = attribute.Key("messaging.destination.name")
	keyPartition = attribute.Key("messaging.destination.partition.id")
	keyOffset    = attribute.Key("messaging.kafka.offset")
	keyConsumer  = attribute.Key("loom.consumer")
)

// RecordSpans are the spans of a batch of records, one for each record that carries
// a trace context, each a child of that context: the relay's produce and the
// consumers' processing join the trace of the write that queued the record.
type RecordSpans struct {
	spans map[*kgo.Record]trace.Span
}

// StartSend starts the produce spans of records (a relay round). With t off, or no
// record carrying a trace context, it costs a loop over the headers (or nothing).
func StartSend(ctx context.Context, t trace.Tracer, records []*kgo.Record) RecordSpans {
	return start(ctx, t, records, trace.SpanKindProducer, "send ", attrSend)
}

// StartProcess starts the spans of consumer processing records (a projector's or the
// index follower's batch).
func StartProcess(ctx context.Context, t trace.Tracer, consumer string, records []*kgo.Record) RecordSpans {
	return start(ctx, t, records, trace.SpanKindConsumer, "process ", attrProcess, keyConsumer.String(consumer))
}

func start(ctx context.Context, t trace.Tracer, records []*kgo.Record, kind trace.SpanKind, verb string, attrs ...attribute.KeyValue) RecordSpans {
	var rs RecordSpans
	if !On(t) {
		return rs
	}
	for _, rec := range records {
		pctx := FromRecord(ctx, rec)
		if !trace.SpanContextFromContext(pctx).IsValid() {
			continue
		}
		if rs.spans == nil {
			rs.spans = make(map[*kgo.Record]trace.Span)
		}
		a := append([]attribute.KeyValue{attrKafka, keyTopic.String(rec.Topic)}, attrs...)
		if kind == trace.SpanKindConsumer {
			a = append(a, keyPartition.String(strconv.Itoa(int(rec.Partition))), keyOffset.Int64(rec.Offset))
		}
		_, span := t.Start(pctx, verb+rec.Topic, trace.WithSpanKind(kind), trace.WithAttributes(a...))
		rs.spans[rec] = span
	}
	return rs
}

// End ends rec's span, failed when err is not nil.
func (rs RecordSpans) End(rec *kgo.Record, err error) {
	span, ok := rs.spans[rec]
	if !ok {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	delete(rs.spans, rec)
}

// Event marks a stage the records reached on every span not ended yet (the bench
// splits a hop at it).
func (rs RecordSpans) Event(name string) {
	for _, span := range rs.spans {
		span.AddEvent(name)
	}
}

// EndAll ends every span not ended yet, failed when err is not nil.
func (rs RecordSpans) EndAll(err error) {
	for rec := range rs.spans {
		rs.End(rec, err)
	}
}

// Recording is a provider with no exporter that hands every span it samples to sp,
// sampling a trace only while on() reports true (a span whose parent is sampled always
// is): the bench times a write's hops from its spans in a loop of its own, and the
// other loops pay for unsampled spans alone.
func Recording(sp sdktrace.SpanProcessor, on func() bool) *Provider {
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp),
		sdktrace.WithSampler(sdktrace.ParentBased(switched{on})))
	return &Provider{TracerProvider: sdk, sdk: sdk}
}

// switched samples a root span while on() reports true.
type switched struct{ on func() bool }

func (s switched) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if s.on() {
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.Drop}
}

func (s switched) Description() string { return "switched" }
