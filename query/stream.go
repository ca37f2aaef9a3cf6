package query

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// The HTTP edge of the bulk reads (namespace.snapshot, erasure.export): the answer's
// status is settled before the first byte (the checks, the audit row), then the body
// streams as JSON Lines, gzip-compressed when the client accepts it.

// streamIdle is how long one write of a stream may wait for the client: the
// listener's write timeout bounds a whole answer, which a large stream outlasts.
const streamIdle = 30 * time.Second

// sendStream answers st as the body, then ends it.
func (s *Service) sendStream(c *fiber.Ctx, st *Stream, what string) error {
	c.Set(fiber.HeaderContentType, "application/x-ndjson")
	c.Set("X-Loom-Stream-Id", st.ID())
	gz := acceptsGzip(c.Get(fiber.HeaderAcceptEncoding))
	if gz {
		c.Set(fiber.HeaderContentEncoding, "gzip")
	}
	c.Vary(fiber.HeaderAcceptEncoding)
	conn := c.Context().Conn()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), snapshotDeadline)
		defer cancel()
		end, err := st.WriteOut(ctx, &deadlineWriter{w: w, conn: conn}, gz)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			s.log.Warn("a bulk read stopped before its end line", "what", what, "id", st.ID(), "err", err)
			return
		}
		s.log.Info("bulk read sent", "what", what, "id", st.ID(), "rows", end.Rows)
	})
	return nil
}

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
