package projector

import (
	"fmt"
	"io"

	chproto "github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
)

// wire hands ch-go columns to the driver's: each is encoded in the native format and
// decoded by the driver's column of the same type, which reads that format (ch-go's,
// underneath both). For fixed-width values that is two copies of the column's bytes,
// not a call per value. The driver's column must be empty (an array's offsets count
// from the block's start): fillTyped hands columns over only into an empty block.
type wire struct {
	buf chproto.Buffer
	src wireSource
	r   *chproto.Reader
}

func newWire() *wire {
	w := &wire{}
	w.r = chproto.NewReader(&w.src)
	return w
}

// hand decodes col into dst, which must take all of it.
func (w *wire) hand(col chproto.ColInput, dst column.Interface) error {
	w.buf.Reset()
	col.EncodeColumn(&w.buf)
	w.src.rest = w.buf.Buf
	if err := dst.Decode(w.r, col.Rows()); err != nil {
		return err
	}
	if len(w.src.rest) != 0 {
		return fmt.Errorf("%d bytes of the column were left", len(w.src.rest))
	}
	return nil
}

// wireSource is the encoded column being handed over; the reader reads exactly it,
// so nothing of one column is buffered when the next is set.
type wireSource struct{ rest []byte }

func (s *wireSource) Read(p []byte) (int, error) {
	if len(s.rest) == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, s.rest)
	s.rest = s.rest[n:]
	return n, nil
}
