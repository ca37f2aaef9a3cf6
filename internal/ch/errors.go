package ch

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Unavailable reports whether err means ClickHouse could not be reached or timed
// out (a retryable 503), as opposed to the server refusing the statement (a bug).
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var exc *clickhouse.Exception
	if errors.As(err, &exc) {
		// 159 timeout, 164 readonly, 202 too many queries, 241 memory limit, 252 too
		// many parts; 60 unknown table: a rebuild's switch renames the serving tables,
		// and a statement landing between two renames finds one missing for a moment.
		switch exc.Code {
		case 60, 159, 164, 202, 241, 252:
			return true
		}
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, clickhouse.ErrAcquireConnTimeout)
}
