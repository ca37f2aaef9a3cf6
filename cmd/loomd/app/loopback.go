package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/loomplane/loom/client"
)

// loopbackBase is the base URL of the in-process API: any host does, since no
// connection to it leaves the process.
const loopbackBase = "http://loomd.loopback"

// adapterClient is the client the adapters (/mcp, /mem0) call Loom with; each request
// they serve acts as its caller's token. With LOOM_ADAPTER_UPSTREAM_URL it calls that
// API; without, this process's own HTTP app, in process (loopbackTransport).
func (p *Process) adapterClient() (*client.Client, error) {
	if up := p.Cfg.Adapters.UpstreamURL; up != "" {
		c, err := client.New(up, "")
		if err != nil {
			return nil, fmt.Errorf("LOOM_ADAPTER_UPSTREAM_URL: %w", err)
		}
		return c, nil
	}
	return client.New(loopbackBase, "", client.WithHTTPClient(&http.Client{Timeout: 60 * time.Second, Transport: p.loopbackTransport()}))
}

// loopbackTransport carries requests to this process's HTTP app without a socket: each
// connection it dials is an in-memory pipe whose other end the app's server serves, so
// a call passes every middleware a request from outside passes (authentication, the
// migration gate, the body limit, tracing), as the adapters' calls to the listener
// they arrived on did.
func (p *Process) loopbackTransport() *http.Transport {
	return &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			pipe := fasthttputil.NewPipeConns()
			// ServeConn ends when either side closes the pipe; what it answers went down
			// the pipe already.
			go func() { _ = p.HTTP.Server().ServeConn(pipe.Conn2()) }()
			return pipe.Conn1(), nil
		},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
}
