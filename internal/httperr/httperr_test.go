package httperr

import (
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// The errors fiber raises before a route runs (a request read too slowly, headers
// over the limit, a connection that failed mid-request, which fiber calls 502) answer
// their own status and code, not 500 INTERNAL; only the unreceived request invites a
// retry.
func TestServerErrorsAnswerTheirOwnCodes(t *testing.T) {
	for _, c := range []struct {
		fiber, status int
		code          string
		retryable     bool
	}{
		{http.StatusRequestTimeout, http.StatusRequestTimeout, CodeRequestTimeout, true},
		{http.StatusBadGateway, http.StatusRequestTimeout, CodeRequestTimeout, true},
		{http.StatusRequestHeaderFieldsTooLarge, http.StatusRequestHeaderFieldsTooLarge, CodeHeadersTooLarge, false},
		{http.StatusRequestEntityTooLarge, http.StatusRequestEntityTooLarge, CodePayloadTooLarge, false},
		{http.StatusMethodNotAllowed, http.StatusMethodNotAllowed, CodeMethodNotAllowed, false},
	} {
		e := classify(fiber.NewError(c.fiber))
		if e.Status != c.status || e.Code != c.code || e.Retryable != c.retryable || c.retryable && e.RetryAfter <= 0 {
			t.Errorf("fiber's %d: %d %s retryable %v after %s", c.fiber, e.Status, e.Code, e.Retryable, e.RetryAfter)
		}
	}
}
