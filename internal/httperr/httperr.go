// Package httperr is the one error envelope every Loom route answers with:
// {"error": {"code": "PINNED_CONFLICT", "message": "...", "retryable": false, ...}},
// with the status codes schemas/openapi.yaml documents. A handler returns an *Error;
// anything else that reaches the error handler is a bug, answered 500 INTERNAL and
// logged.
package httperr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
)

// Error is an answer the caller can act on.
type Error struct {
	Status     int
	Code       string
	Message    string
	Retryable  bool
	RetryAfter time.Duration
	Field      string
	Extra      map[string]any
	Cause      error // logged, never sent
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Cause)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// With returns a copy carrying an extra envelope field.
func (e *Error) With(key string, v any) *Error {
	c := *e
	c.Extra = map[string]any{}
	for k, x := range e.Extra {
		c.Extra[k] = x
	}
	c.Extra[key] = v
	return &c
}

// Codes of the envelope (the Error schema's code enum in schemas/openapi.yaml), by the
// status they travel with.
const (
	CodeValidationFailed   = memrow.CodeValidationFailed  // 422
	CodeCharLimitExceeded  = memrow.CodeCharLimitExceeded // 422
	CodeUnauthenticated    = "UNAUTHENTICATED"            // 401
	CodePermissionDenied   = "PERMISSION_DENIED"          // 403
	CodeNotFound           = "RESOURCE_NOT_FOUND"         // 404
	CodePinnedConflict     = "PINNED_CONFLICT"            // 409
	CodeKeyHoldsFact       = "KEY_HOLDS_FACT"             // 409
	CodePreconditionFailed = "PRECONDITION_FAILED"        // 409
	CodeLocked             = "MEMORY_LOCKED"              // 423
	CodeBlacklisted        = "BLACKLISTED"                // 422
	CodeMethodNotAllowed   = "METHOD_NOT_ALLOWED"         // 405
	CodePayloadTooLarge    = "PAYLOAD_TOO_LARGE"          // 413
	CodeHeadersTooLarge    = "HEADERS_TOO_LARGE"          // 431
	CodeRequestTimeout     = "REQUEST_TIMEOUT"            // 408
	CodeAdmissionContended = "ADMISSION_CONTENDED"        // 503
	CodePostgresDown       = "POSTGRES_UNAVAILABLE"       // 503
	CodeClickHouseDown     = "CLICKHOUSE_UNAVAILABLE"     // 503
	CodeEmbedderDown       = "EMBEDDER_UNAVAILABLE"       // 503
	CodeProjectionBehind   = "PROJECTION_BEHIND"          // 503
	CodeKafkaDown          = "KAFKA_UNAVAILABLE"          // 503
	CodeGroupActive        = "CONSUMER_GROUP_ACTIVE"      // 409
	CodeMigrationsPending  = "MIGRATIONS_PENDING"         // 503
	CodeInternal           = "INTERNAL"                   // 500

	// The model-backed routes' (see LLM). The seeds name no code for these.
	CodeLLMNotConfigured    = "LLM_NOT_CONFIGURED"     // 503: set the provider's settings
	CodeLLMUnavailable      = "LLM_UNAVAILABLE"        // 503: transient; retry
	CodeLLMProviderRejected = "LLM_PROVIDER_REJECTED"  // 503: the provider refused the key or the model
	CodeLLMRequestRefused   = "LLM_REQUEST_REFUSED"    // 422: the provider refused this request
	CodeLLMBadAnswer        = "LLM_BAD_ANSWER"         // 502: the model's answer was unusable; retry
	CodeCostCapReached      = "DAILY_COST_CAP_REACHED" // 429: until the day (UTC) ends
)

// New makes an error with a status and code.
func New(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// Validation is 422 VALIDATION_FAILED naming the field.
func Validation(field, message string) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Code: CodeValidationFailed, Message: message, Field: field}
}

// NotFound is 404 RESOURCE_NOT_FOUND.
func NotFound(message string) *Error {
	return New(http.StatusNotFound, CodeNotFound, message)
}

// Unavailable is a retryable 503.
func Unavailable(code, message string, cause error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: code, Message: message, Retryable: true, RetryAfter: time.Second, Cause: cause}
}

// ClickHouse answers a ClickHouse that cannot be reached as a retryable 503, and a
// statement it refused as the bug it is.
func ClickHouse(doing string, err error, unavailable bool) *Error {
	if unavailable {
		return Unavailable(CodeClickHouseDown, "ClickHouse is unavailable while "+doing+"; retry", err)
	}
	return Store(doing, err)
}

// Store maps a store error met while doing what into the answer: Postgres that
// cannot be reached is a retryable 503; anything else is a bug and a 500.
func Store(doing string, err error) *Error {
	var he *Error
	if errors.As(err, &he) {
		return he
	}
	if pg.Unavailable(err) {
		e := Unavailable(CodePostgresDown, "Postgres is unavailable while "+doing+"; retry", err)
		if pg.OutcomeUnknown(err) {
			e = e.With("outcome_unknown", true)
		}
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error while " + doing, Cause: err}
}

// KnownMethods are the HTTP methods Loom's routes use; AllowKnownMethods answers any
// other as 405 METHOD_NOT_ALLOWED naming them.
var KnownMethods = []string{http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodPatch, http.MethodPost, http.MethodPut}

// AllowKnownMethods wraps a fiber app's server so a request with a method no route
// uses gets the envelope (405 METHOD_NOT_ALLOWED with Allow), where fiber would answer
// a plain-text 400 for a method it does not know. Call it once the app is built.
func AllowKnownMethods(app *fiber.App, log *slog.Logger) {
	srv := app.Server()
	next := srv.Handler
	allow := strings.Join(KnownMethods, ", ")
	render := Handler(log)
	srv.Handler = func(rc *fasthttp.RequestCtx) {
		if slices.Contains(KnownMethods, string(rc.Method())) {
			next(rc)
			return
		}
		c := app.AcquireCtx(rc)
		defer app.ReleaseCtx(c)
		c.Set(fiber.HeaderAllow, allow)
		render(c, New(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method "+string(rc.Method())+" is not served: use one of "+allow).
			With("allow", KnownMethods))
	}
}

// Handler renders every error a route returns as the envelope.
func Handler(log *slog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		e := classify(err)
		switch {
		case e.Retryable:
			log.Warn("request refused, retryable", "method", c.Method(), "path", c.Path(), "code", e.Code, "err", err)
		case e.Status >= 500:
			log.Error("request failed", "method", c.Method(), "path", c.Path(), "code", e.Code, "err", err)
		}
		body := e.body()
		if secs, ok := body["retry_after_s"].(int); ok {
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
		}
		return c.Status(e.Status).JSON(fiber.Map{"error": body})
	}
}

// Envelope is the answer an error gets, as Handler writes it: its status and the
// envelope's body ({"error": {...}}). A stream that fails after its headers went out
// (memory.ask's server-sent events) sends the body as its error event.
func Envelope(err error) (int, map[string]any) {
	e := classify(err)
	return e.Status, map[string]any{"error": e.body()}
}

func (e *Error) body() map[string]any {
	body := map[string]any{"code": e.Code, "message": e.Message, "retryable": e.Retryable}
	if e.Field != "" {
		body["field"] = e.Field
	}
	for k, v := range e.Extra {
		body[k] = v
	}
	if e.Retryable && e.RetryAfter > 0 {
		body["retry_after_s"] = int(math.Ceil(e.RetryAfter.Seconds()))
	}
	return body
}

func classify(err error) *Error {
	var he *Error
	if errors.As(err, &he) {
		return he
	}
	var le *llm.Error
	if errors.As(err, &le) {
		return LLM(le)
	}
	var fe *memrow.FieldError
	if errors.As(err, &fe) {
		code := fe.Code
		if code == "" {
			code = CodeValidationFailed
		}
		return &Error{Status: http.StatusUnprocessableEntity, Code: code, Message: fe.Message, Field: fe.Field}
	}
	var fiberErr *fiber.Error
	if errors.As(err, &fiberErr) {
		switch fiberErr.Code {
		case http.StatusNotFound:
			return NotFound("no such route")
		case http.StatusMethodNotAllowed:
			return New(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed on this route")
		case http.StatusRequestEntityTooLarge:
			return New(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "request body too large")
		case http.StatusRequestHeaderFieldsTooLarge:
			return New(http.StatusRequestHeaderFieldsTooLarge, CodeHeadersTooLarge,
				"the request line and headers are too large (4 KB together): a long path is refused here too; a memory key is at most 256 bytes")
		case http.StatusRequestTimeout:
			return &Error{Status: http.StatusRequestTimeout, Code: CodeRequestTimeout, Retryable: true, RetryAfter: time.Second,
				Message: "the request was not received in time; send it again"}
		case http.StatusBadGateway:
			// Fiber's name for a connection that failed while the request was read (a
			// client gone mid-request, a reset at shutdown): no upstream and no fault of
			// Loom's, so not a 500 logged as one.
			return &Error{Status: http.StatusRequestTimeout, Code: CodeRequestTimeout, Retryable: true, RetryAfter: time.Second,
				Message: "the request was not received whole (its connection failed); send it again"}
		case http.StatusBadRequest, http.StatusUnprocessableEntity:
			return Validation("body", fiberErr.Message)
		}
		return New(fiberErr.Code, CodeInternal, fiberErr.Message)
	}
	if errors.Is(err, context.DeadlineExceeded) || pg.Unavailable(err) {
		return Store("serving the request", err)
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", Cause: err}
}
