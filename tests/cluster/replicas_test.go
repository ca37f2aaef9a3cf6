package cluster

import (
	"context"
	"net/http"
	"time"

	"github.com/loomplane/loom/client"
)

// caller talks to the replicas of one role, as a client behind a load balancer does:
// one typed client per replica, each call sent once.
type caller struct {
	token string
	http  *http.Client
}

func newCaller(token string) *caller {
	// No keep-alive: a replica killed and restarted on its port leaves no stale
	// connection behind, and each request picks its replica afresh.
	return &caller{token: token, http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

// at is the client of the replica at url.
func (c *caller) at(url string) *client.Client {
	cl, err := client.New(url, c.token, client.WithHTTPClient(c.http))
	if err != nil {
		panic(err) // a proc's URL is always http://127.0.0.1:port
	}
	return cl
}

// answered sorts a call's error: an error answer of the server (e), or none because
// the call got no answer (the replica is down or died mid-request).
func answered(err error) (e *client.Error, ok bool) { return client.AsError(err) }

// retryable503 reports whether e is a retryable 503.
func retryable503(e *client.Error) bool {
	return e.Status == http.StatusServiceUnavailable && e.Retryable
}

// metricsText is p's /metrics, or "" when it does not answer.
func metricsText(url string) string {
	text, err := newCaller("").at(url).Metrics(context.Background())
	if err != nil {
		return ""
	}
	return text
}
