package query

import (
	"io"
	"net"
	"strings"
	"time"
)

// The pieces of the bulk reads' HTTP edge (namespace.snapshot, erasure.export) that
// need no request: sendStream in handlers.go settles the status before the first byte
// (the checks, the audit row), then streams the body as JSON Lines, gzip-compressed
// when the client accepts it.

// streamIdle is how long one write of a stream may wait for the client: the
// listener's write timeout bounds a whole answer, which a large stream outlasts.
const streamIdle = 30 * time.Second

func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// deadlineWriter moves the connection's write deadline on as the stream makes
// progress, so only a client that stops reading for streamIdle ends it.
type deadlineWriter struct {
	w     io.Writer
	conn  net.Conn
	moved time.Time
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	if now := time.Now(); d.conn != nil && now.Sub(d.moved) > time.Second {
		d.conn.SetWriteDeadline(now.Add(streamIdle))
		d.moved = now
	}
	return d.w.Write(b)
}
