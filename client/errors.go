package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Code is an error code of Loom's error envelope (schemas/openapi.yaml, schema Error).
type Code string

// The codes the server answers, by status.
const (
	CodeValidationFailed      Code = "VALIDATION_FAILED"      // 422
	CodeCharLimitExceeded     Code = "CHAR_LIMIT_EXCEEDED"    // 422
	CodeBlacklisted           Code = "BLACKLISTED"            // 422
	CodeUnauthenticated       Code = "UNAUTHENTICATED"        // 401
	CodePermissionDenied      Code = "PERMISSION_DENIED"      // 403
	CodeNotFound              Code = "RESOURCE_NOT_FOUND"     // 404
	CodeMethodNotAllowed      Code = "METHOD_NOT_ALLOWED"     // 405
	CodePinnedConflict        Code = "PINNED_CONFLICT"        // 409
	CodeKeyHoldsFact          Code = "KEY_HOLDS_FACT"         // 409
	CodePreconditionFailed    Code = "PRECONDITION_FAILED"    // 409
	CodeIdempotentConflict    Code = "IDEMPOTENT_CONFLICT"    // 409
	CodeConsumerGroupActive   Code = "CONSUMER_GROUP_ACTIVE"  // 409
	CodePayloadTooLarge       Code = "PAYLOAD_TOO_LARGE"      // 413
	CodeMemoryLocked          Code = "MEMORY_LOCKED"          // 423
	CodeAdmissionContended    Code = "ADMISSION_CONTENDED"    // 503
	CodePostgresUnavailable   Code = "POSTGRES_UNAVAILABLE"   // 503
	CodeClickHouseUnavailable Code = "CLICKHOUSE_UNAVAILABLE" // 503
	CodeEmbedderUnavailable   Code = "EMBEDDER_UNAVAILABLE"   // 503
	CodeProjectionBehind      Code = "PROJECTION_BEHIND"      // 503
	CodeIdempotentInProgress  Code = "IDEMPOTENT_IN_PROGRESS" // 503
	CodeIdempotentTakenOver   Code = "IDEMPOTENT_TAKEN_OVER"  // 503
	CodeKafkaUnavailable      Code = "KAFKA_UNAVAILABLE"      // 503
	CodeMigrationsPending     Code = "MIGRATIONS_PENDING"     // 503
	CodeInternal              Code = "INTERNAL"               // 500
)

// Error is an error answer of the API: the envelope's fields and the HTTP status.
type Error struct {
	Status    int    // the HTTP status
	Code      Code   // the envelope's code; "" when the answer carried no envelope
	Message   string // for a person, not for matching
	Retryable bool   // the same request may succeed later (under the same Idempotency-Key, if it had one)
	// RetryAfter is the wait the server asked for (retry_after_s, else the Retry-After header).
	RetryAfter time.Duration
	// Field is the request field a 422 is about (`body`, `value`, `entries[i].memory_key`, ...).
	Field string
	// RefusedAction is MEMORY_LOCKED's `write`, `expire`, `delete` or `reject`.
	RefusedAction string
	// OutcomeUnknown is POSTGRES_UNAVAILABLE's: the commit may have applied.
	OutcomeUnknown bool
	// Namespace, Generation and Watermark are a read's PROJECTION_BEHIND.
	Namespace             string
	Generation, Watermark int64
	// Members is CONSUMER_GROUP_ACTIVE's live members.
	Members []string
	// PendingMigrations is MIGRATIONS_PENDING's.
	PendingMigrations []string
	// Body is the answer as sent.
	Body []byte
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "loom: %d", e.Status)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " (field %s)", e.Field)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

// AsError returns err's *Error, if it holds one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// IsCode reports whether err is an API error with code.
func IsCode(err error, code Code) bool {
	e, ok := AsError(err)
	return ok && e.Code == code
}

// ErrorOf reads an answer got otherwise (Client.Raw): a *Error for a status outside
// 2xx, nil for a success.
func ErrorOf(status int, body []byte) error {
	if status >= 200 && status <= 299 {
		return nil
	}
	return errorFrom(status, http.Header{}, body)
}

// envelope is the wire form of an error answer.
type envelope struct {
	Error struct {
		Code              Code     `json:"code"`
		Message           string   `json:"message"`
		Retryable         bool     `json:"retryable"`
		Field             string   `json:"field"`
		RefusedAction     string   `json:"refused_action"`
		RetryAfterS       int      `json:"retry_after_s"`
		Namespace         string   `json:"namespace"`
		Generation        int64    `json:"generation"`
		Watermark         int64    `json:"watermark"`
		OutcomeUnknown    bool     `json:"outcome_unknown"`
		Members           []string `json:"members"`
		PendingMigrations []string `json:"pending_migrations"`
	} `json:"error"`
}

// errorFrom reads a non-2xx answer. An answer without the envelope (a proxy's page)
// keeps its status and text, and is not retryable: nothing says the request may be sent again.
func errorFrom(status int, h http.Header, body []byte) *Error {
	e := &Error{Status: status, Body: body}
	var env envelope
	if json.Unmarshal(body, &env) == nil && env.Error.Code != "" {
		w := env.Error
		e.Code, e.Message, e.Retryable, e.Field, e.RefusedAction = w.Code, w.Message, w.Retryable, w.Field, w.RefusedAction
		e.Namespace, e.Generation, e.Watermark, e.OutcomeUnknown = w.Namespace, w.Generation, w.Watermark, w.OutcomeUnknown
		e.Members, e.PendingMigrations = w.Members, w.PendingMigrations
		e.RetryAfter = time.Duration(w.RetryAfterS) * time.Second
	} else {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
	}
	if e.RetryAfter == 0 {
		if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		}
	}
	return e
}
