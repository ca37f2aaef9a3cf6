package llm

import (
	"errors"
	"fmt"
	"time"
)

// Class is what a failed call means for whoever asked, as the seeds' conflict
// resolver classifies provider errors.
type Class int

const (
	// ClassNotConfigured: no provider is set; nothing was sent.
	ClassNotConfigured Class = iota + 1
	// ClassStopped: the provider refused the key or the model (401, 403, 404). No
	// further call can succeed until an operator changes the settings.
	ClassStopped
	// ClassTransient: 408, 409, 429, 5xx, a timeout or no connection, after this
	// process's own retries. Asking later may succeed; a worker spends no attempt.
	ClassTransient
	// ClassRefused: any other 4xx. The provider refuses this request, and asking
	// again gets the same answer. Not billed.
	ClassRefused
	// ClassMalformed: an answer with nothing usable (cut at the output cap, not the
	// schema's JSON, a refusal). It was paid for and counted.
	ClassMalformed
	// ClassCapped: the namespace's daily cost cap is reached; nothing was sent.
	ClassCapped
)

func (c Class) String() string {
	switch c {
	case ClassNotConfigured:
		return "not_configured"
	case ClassStopped:
		return "stopped"
	case ClassTransient:
		return "transient"
	case ClassRefused:
		return "refused"
	case ClassMalformed:
		return "malformed"
	case ClassCapped:
		return "capped"
	}
	return "unknown"
}

// Error is a model call that did not give a usable answer.
type Error struct {
	Class   Class
	Status  int    // the provider's HTTP status; 0 when it sent none
	Message string // the provider's message, or what went wrong
	// RetryAfter is when asking again may help: the provider's Retry-After on a
	// transient failure, the time left until the cap resets on a capped one.
	RetryAfter time.Duration
	Purpose    Purpose
	Model      string
	// Capped calls only: the cap, today's spend it was read against, and when the
	// day (UTC, from the provider's clock) ends.
	CapUSD, SpentUSD float64
	ResetsAt         time.Time
	// Held marks a capped call refused because its org's model calls are held
	// (loom.model_call_holds): it waits for a release, not for the day's end.
	Held  bool
	Cause error

	sentinel bool
}

func (e *Error) Error() string {
	s := "model call"
	if e.Purpose != "" {
		s += " (" + string(e.Purpose) + ")"
	}
	s += ": " + e.Class.String()
	if e.Status != 0 {
		s += fmt.Sprintf(": HTTP %d", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Cause }

// Is matches the sentinel of the error's class: errors.Is(err, llm.ErrTransient).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.sentinel && t.Class == e.Class
}

// sentinelOf makes a class's sentinel, which matches any error of the class.
func sentinelOf(c Class) *Error { return &Error{Class: c, sentinel: true} }

// Sentinels for errors.Is, one per class.
var (
	ErrNotConfigured = sentinelOf(ClassNotConfigured)
	ErrStopped       = sentinelOf(ClassStopped)
	ErrTransient     = sentinelOf(ClassTransient)
	ErrRefused       = sentinelOf(ClassRefused)
	ErrMalformed     = sentinelOf(ClassMalformed)
	ErrCapped        = sentinelOf(ClassCapped)
)

// ClassOf is err's class, or 0 when err is not a model call's error.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return 0
}

// SettingsToSet are the settings that configure a provider, for the not-configured
// answer to name.
func SettingsToSet() []string {
	return []string{"LOOM_LLM_BASE_URL", "LOOM_LLM_MODEL", "LOOM_LLM_API_KEY"}
}

// NotConfigured is the error every call answers without a provider, for a caller that
// has no provider to ask.
func NotConfigured(purpose Purpose) *Error { return notConfigured(purpose) }

func notConfigured(purpose Purpose) *Error {
	return &Error{Class: ClassNotConfigured, Purpose: purpose,
		Message: "no model provider is configured: set LOOM_LLM_BASE_URL and LOOM_LLM_MODEL, and LOOM_LLM_API_KEY when the provider needs one " +
			"(OpenAI: https://api.openai.com/v1; a local Ollama: http://localhost:11434/v1)"}
}

// classByStatus is the seeds' table: 401/403/404 stop, 408/409/429/5xx are
// transient, any other 4xx refuses this request.
func classByStatus(status int) Class {
	switch {
	case status == 401 || status == 403 || status == 404:
		return ClassStopped
	case status == 408 || status == 409 || status == 429 || status >= 500:
		return ClassTransient
	}
	return ClassRefused
}

// IsHeld reports whether err is a call refused because its org's model calls are held.
func IsHeld(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Held
}
