package httperr

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/llm"
)

func answer(t *testing.T, err error) (int, map[string]any, string) {
	t.Helper()
	app := fiber.New(fiber.Config{ErrorHandler: Handler(slog.New(slog.DiscardHandler))})
	app.Get("/", func(*fiber.Ctx) error { return fmt.Errorf("asking the model: %w", err) })
	res, e := app.Test(httptest.NewRequest("GET", "/", nil))
	if e != nil {
		t.Fatal(e)
	}
	b, _ := io.ReadAll(res.Body)
	var body struct {
		Error map[string]any `json:"error"`
	}
	if e := json.Unmarshal(b, &body); e != nil {
		t.Fatalf("%s: %v", b, e)
	}
	return res.StatusCode, body.Error, res.Header.Get("Retry-After")
}

func TestModelErrorsAnswerTheirCodes(t *testing.T) {
	resets := time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		err        *llm.Error
		status     int
		code       string
		retryAfter string
	}{
		{&llm.Error{Class: llm.ClassNotConfigured, Message: "no model provider is configured"}, 503, CodeLLMNotConfigured, ""},
		{&llm.Error{Class: llm.ClassTransient, Status: 429, RetryAfter: 3 * time.Second}, 503, CodeLLMUnavailable, "3"},
		{&llm.Error{Class: llm.ClassStopped, Status: 401, Message: "Incorrect API key provided: sk-ab***yz"}, 503, CodeLLMProviderRejected, ""},
		{&llm.Error{Class: llm.ClassRefused, Status: 400, Message: "maximum context length exceeded"}, 422, CodeLLMRequestRefused, ""},
		{&llm.Error{Class: llm.ClassMalformed}, 502, CodeLLMBadAnswer, "1"},
		{&llm.Error{Class: llm.ClassCapped, CapUSD: 1, SpentUSD: 1.2, ResetsAt: resets, RetryAfter: 90 * time.Minute, Message: "capped"}, 429, CodeCostCapReached, "5400"},
	} {
		status, body, retry := answer(t, tc.err)
		if status != tc.status || body["code"] != tc.code || retry != tc.retryAfter {
			t.Errorf("%v: %d %v Retry-After %q, want %d %s %q", tc.err, status, body, retry, tc.status, tc.code, tc.retryAfter)
		}
		if strings.Contains(fmt.Sprint(body), "sk-ab") {
			t.Errorf("%v: the answer carries the provider's message about the key: %v", tc.err, body)
		}
	}
	_, body, _ := answer(t, &llm.Error{Class: llm.ClassNotConfigured})
	if fmt.Sprint(body["settings"]) != "[LOOM_LLM_BASE_URL LOOM_LLM_MODEL LOOM_LLM_API_KEY]" {
		t.Errorf("not configured names %v", body["settings"])
	}
	_, body, _ = answer(t, &llm.Error{Class: llm.ClassCapped, CapUSD: 1, SpentUSD: 1.2, ResetsAt: resets})
	if body["cap_usd"] != 1.0 || body["spent_usd"] != 1.2 || body["resets_at"] != "2026-03-15T00:00:00Z" {
		t.Errorf("capped answer %v", body)
	}
}
