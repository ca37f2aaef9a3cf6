package projector

import (
	"context"
	"fmt"
	"io"

	chproto "github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/tableset"
)

// sendTyped inserts rows into table of set through cols, in one INSERT.
func sendTyped[R any](ctx context.Context, conn *ch.Conn, set tableset.Set, table string, cols []typedColumn[R], rows []R) error {
	name := set.Qualified(table)
	b, err := conn.PrepareBatch(ctx, insertInto(set, table, columnNames(cols)))
	if err != nil {
		return fmt.Errorf("prepare insert into %s: %w", name, err)
	}
	if err := fillTyped(b, cols, rows); err != nil {
		b.Abort()
		return fmt.Errorf("build insert into %s: %w", name, err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert into %s: %w", name, err)
	}
	return nil
}

// fillTyped builds rows into b's block flushRows at a time, each share sent on within
// the INSERT but the last (Send sends it). The typed columns are built, encoded in the
// native format and decoded into the driver's own columns, which read that format
// (ch-go's, underneath both): copies of the columns' bytes, not a call per value. The
// driver's columns must be empty for that (an array's offsets are the block's), so
// the block is checked empty before each share, and each share's columns are checked
// against the server's: a column the statement names with another type is refused,
// not sent misread.
func fillTyped[R any](b driver.Batch, cols []typedColumn[R], rows []R) error {
	var wire chproto.Buffer
	src := &wireSource{}
	r := chproto.NewReader(src)
	for start := 0; start < len(rows); start += flushRows {
		share := rows[start:min(start+flushRows, len(rows))]
		dst := b.Columns()
		if len(dst) != len(cols) {
			return fmt.Errorf("the server's block has %d columns, the projector builds %d", len(dst), len(cols))
		}
		if b.Rows() != 0 {
			return fmt.Errorf("the block holds %d rows before the typed columns", b.Rows())
		}
		wire.Reset()
		for i, c := range cols {
			if got, want := string(dst[i].Type()), string(c.col.Type()); got != want {
				return fmt.Errorf("column %s is %s on the server, the projector builds %s", c.name, got, want)
			}
			c.col.Reset()
			for _, row := range share {
				c.add(row)
			}
			c.col.EncodeColumn(&wire)
		}
		src.rest = wire.Buf
		for i := range dst {
			if err := dst[i].Decode(r, len(share)); err != nil {
				return fmt.Errorf("hand column %s to the driver: %w", cols[i].name, err)
			}
		}
		if len(src.rest) != 0 {
			return fmt.Errorf("%d bytes of the columns were not taken by the driver", len(src.rest))
		}
		if start+flushRows < len(rows) {
			if err := b.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// wireSource is the encoded columns of one share, read by the driver's columns in
// turn; it is refilled for the next share once they took all of it.
type wireSource struct{ rest []byte }

func (s *wireSource) Read(p []byte) (int, error) {
	if len(s.rest) == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, s.rest)
	s.rest = s.rest[n:]
	return n, nil
}
