package httperr

import (
	"net/http"
	"time"

	"github.com/loomplane/loom/internal/llm"
)

// LLM maps a model call's error to its answer.
func LLM(e *llm.Error) *Error {
	switch e.Class {
	case llm.ClassNotConfigured:
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeLLMNotConfigured, Message: e.Message,
			Extra: map[string]any{"settings": llm.SettingsToSet()}, Cause: e}
	case llm.ClassTransient:
		retry := e.RetryAfter
		if retry <= 0 {
			retry = time.Second
		}
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeLLMUnavailable, Retryable: true, RetryAfter: retry,
			Message: "the model provider is unavailable; retry", Cause: e}
	case llm.ClassStopped:
		// The provider's own message is logged, not sent: it may echo part of the key.
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeLLMProviderRejected, Cause: e,
			Message: "the model provider refused the key or the model; an operator must check LOOM_LLM_API_KEY and the LOOM_*_MODEL settings",
			Extra:   map[string]any{"provider_status": e.Status}}
	case llm.ClassRefused:
		return &Error{Status: http.StatusUnprocessableEntity, Code: CodeLLMRequestRefused, Cause: e,
			Message: "the model provider refused the request: " + e.Message, Extra: map[string]any{"provider_status": e.Status}}
	case llm.ClassCapped:
		return &Error{Status: http.StatusTooManyRequests, Code: CodeCostCapReached, Retryable: true, RetryAfter: e.RetryAfter,
			Message: e.Message, Cause: e, Extra: map[string]any{"cap_usd": e.CapUSD, "spent_usd": e.SpentUSD,
				"resets_at": e.ResetsAt.UTC().Format(time.RFC3339)}}
	}
	return &Error{Status: http.StatusBadGateway, Code: CodeLLMBadAnswer, Retryable: true, RetryAfter: time.Second,
		Message: "the model's answer was unusable; retry", Cause: e}
}
