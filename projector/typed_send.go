package projector

import (
	"context"
	"fmt"

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
// the INSERT but the last (Send sends it). Each share's columns are checked against
// the server's block first: a column the statement names with another type is
// refused, not sent misread. The block must be empty before each share (wire).
func fillTyped[R any](b driver.Batch, cols []typedColumn[R], rows []R) error {
	w := newWire()
	for start := 0; start < len(rows); start += flushRows {
		share := rows[start:min(start+flushRows, len(rows))]
		dst := b.Columns()
		if len(dst) != len(cols) {
			return fmt.Errorf("the server's block has %d columns, the projector builds %d", len(dst), len(cols))
		}
		if b.Rows() != 0 {
			return fmt.Errorf("the block holds %d rows before the typed columns", b.Rows())
		}
		for i, c := range cols {
			if got := string(dst[i].Type()); got != c.typ {
				return fmt.Errorf("column %s is %s on the server, the projector builds %s", c.name, got, c.typ)
			}
			c.build(share)
			if err := c.hand(dst[i], w); err != nil {
				return fmt.Errorf("hand column %s to the driver: %w", c.name, err)
			}
		}
		if start+flushRows < len(rows) {
			if err := b.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}
