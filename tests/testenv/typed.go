package testenv

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
)

// Typed is the typed client (package client) of the same server, as the same token:
// what a test reads of an answer is a field of its type, so a field the server no
// longer sends fails to compile rather than reads as nothing.
func (c *Client) Typed(t testing.TB) *client.Client {
	t.Helper()
	tc, err := client.New(c.URL, c.Token, client.WithHTTPClient(c.HTTP))
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// Retryable503 reports whether err is a retryable 503 with code.
func Retryable503(err error, code client.Code) bool {
	e, ok := client.AsError(err)
	return ok && e.Status == http.StatusServiceUnavailable && e.Code == code && e.Retryable
}

// Erasure requests an erasure through the typed client and waits until its saga
// finished; it fails the test unless the saga completed.
func (c *Client) Erasure(t testing.TB, req client.ErasureRequest) *client.Erasure {
	t.Helper()
	e, err := c.Typed(t).RequestErasure(context.Background(), req)
	if err != nil {
		t.Fatalf("erasure %+v: %v", req, err)
	}
	return c.AwaitSaga(t, e.ID, 90*time.Second)
}

// AwaitSaga follows an erasure until it is no longer running, within limit, and fails
// the test unless it completed.
func (c *Client) AwaitSaga(t testing.TB, id string, limit time.Duration) *client.Erasure {
	t.Helper()
	tc := c.Typed(t)
	var view *client.Erasure
	Eventually(t, limit, "erasure "+id+" to finish", func() bool {
		var err error
		if view, err = tc.Erasure(context.Background(), id); err != nil {
			t.Fatalf("GET erasure %s: %v", id, err)
		}
		return view.Status != "running"
	})
	if view.Status != "completed" {
		t.Fatalf("erasure %s ended %s: %+v", id, view.Status, view)
	}
	return view
}
