package bench

import (
	"fmt"
	"net/http"
	"time"

	"github.com/loomplane/loom/client"
)

// requestTimeout bounds one API call: a call slower than this is a hang, not a sample.
const requestTimeout = 60 * time.Second

// newClient is the typed client of the API as one token, keeping enough idle
// connections for the highest concurrency, so a run measures requests, not TCP
// handshakes. It sends each call once: an error answer is a *client.Error, counted by
// its status and code.
func newClient(url, token string, opts ...client.Option) (*client.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 256
	return client.New(url, token, append([]client.Option{client.WithHTTPClient(&http.Client{Transport: tr, Timeout: requestTimeout})}, opts...)...)
}

// callKind names an error answer by its status and code; ok is false for a call that
// got no answer (a transport failure).
func callKind(err error) (kind string, retryable, ok bool) {
	e, ok := client.AsError(err)
	if !ok {
		return "", false, false
	}
	return fmt.Sprintf("%d %s", e.Status, e.Code), e.Retryable, true
}
