// Package loopback finds the API an adapter (the MCP server, the mem0 facade) calls for
// a request: the configured upstream, else the listener the request arrived on, so the
// adapter's REST calls reach this very process.
package loopback

import (
	"net"
	"net/http"
)

// BaseURL is upstream when set, else the base URL of the listener r arrived on: net/http
// records the connection's local address in the context, and fasthttp's request context
// (behind fiber's adaptor) answers it itself. The Host header is the last resort.
func BaseURL(upstream string, r *http.Request) string {
	if upstream != "" {
		return upstream
	}
	ctx := r.Context()
	if a, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok && a != nil {
		return "http://" + a.String()
	}
	if la, ok := ctx.(interface{ LocalAddr() net.Addr }); ok && la.LocalAddr() != nil {
		return "http://" + la.LocalAddr().String()
	}
	return "http://" + r.Host
}
