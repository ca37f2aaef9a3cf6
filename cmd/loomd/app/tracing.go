package app

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/tracing"
)

// traceRequests makes each request a server span, a child of the caller's W3C
// traceparent when it sends one, and hands the span to the handlers in the request's
// context: the commit, the relay's produce and the consumers' processing join it. The
// span is named by the route's pattern (a namespace or a key is no span name), and
// health and metrics, scraped every few seconds, are left out. A middleware of our own
// over OpenTelemetry's propagation API: the contrib otelfiber pulls in a fiber and an
// otel of its choosing, for what is these few lines.
func traceRequests(t trace.Tracer) fiber.Handler {
	return func(c *fiber.Ctx) error {
		path := c.Path()
		if path == "/metrics" || strings.HasPrefix(path, "/v1/health") {
			return c.Next()
		}
		ctx := tracing.W3C.Extract(c.UserContext(), propagation.MapCarrier{
			"traceparent": c.Get("traceparent"), "tracestate": c.Get("tracestate")})
		ctx, span := t.Start(ctx, c.Method(), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", c.Method())))
		defer span.End()
		c.SetUserContext(ctx)
		err := c.Next()
		route := c.Route().Path
		span.SetName(c.Method() + " " + route)
		status := c.Response().StatusCode()
		if err != nil {
			// The app's error handler answers it after the middleware returns: its status
			// is the one the error maps to.
			status, _ = httperr.Envelope(err)
			span.RecordError(err)
		}
		span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
		return err
	}
}
