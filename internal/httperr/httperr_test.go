package httperr

import (
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// The errors fiber raises before a route runs (a request read too slowly, headers
// over the limit) answer their own status and code, not 500 INTERNAL; only the
// timeout invites a retry.
func TestServerErrorsAnswerTheirOwnCodes(t *testing.T) {
	for _, c := range []struct {
		status    int
		code      string
		retryable bool
	}{
		{http.StatusRequestTimeout, CodeRequestTimeout, true},
		{http.StatusRequestHeaderFieldsTooLarge, CodeHeadersTooLarge, false},
		{http.StatusRequestEntityTooLarge, CodePayloadTooLarge, false},
		{http.StatusMethodNotAllowed, CodeMethodNotAllowed, false},
	} {
		e := classify(fiber.NewError(c.status))
		if e.Status != c.status || e.Code != c.code || e.Retryable != c.retryable || c.retryable && e.RetryAfter <= 0 {
			t.Errorf("fiber's %d: %d %s retryable %v after %s", c.status, e.Status, e.Code, e.Retryable, e.RetryAfter)
		}
	}
}
