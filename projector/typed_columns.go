package projector

import (
	"strings"
	"time"

	chproto "github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/google/uuid"
)

// An insert's columns built typed. clickhouse-go (2.51) takes a row at a time through
// `any`s: every scalar boxed (a heap allocation for most), every value type-switched,
// and an array's elements appended one interface call each (two 384-dim vectors a
// row). A typedColumn builds a share of rows' column typed and hands it to the
// driver's column whole, the cheapest way that column takes it:
//   - fixed-width values and their arrays (numbers, UUIDs, times, vectors) are built as
//     ch-go's proto columns, which the driver's own columns wrap, and handed over in
//     the native format they share: a copy of the column's bytes (wire.go);
//   - strings as a []string the driver's String column appends in one call (decoding
//     them from the native format reads each length a byte at a time);
//   - arrays of strings a row at a time, through pointers into the row's own slice
//     (stringCells: no allocation, one call per element).

// typedColumn is one column of an insert whose rows are R: its name in the statement,
// its type as the server names it, how a share of rows builds it and how it is handed
// to the driver's column.
type typedColumn[R any] struct {
	name, typ string
	build     func(share []R)
	hand      func(dst column.Interface, w *wire) error
}

// columnNames is the statement's column list of cols, in order.
func columnNames[R any](cols []typedColumn[R]) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// wireCol is a column built as ch-go's col, a row at a time through add, and handed
// over in the native format.
func wireCol[R any](name string, col chproto.Column, add func(R)) typedColumn[R] {
	return typedColumn[R]{name: name, typ: string(col.Type()),
		build: func(share []R) {
			col.Reset()
			for _, r := range share {
				add(r)
			}
		},
		hand: func(dst column.Interface, w *wire) error { return w.hand(col, dst) },
	}
}

func strCol[R any](name string, get func(R) string) typedColumn[R] {
	var buf []string
	return typedColumn[R]{name: name, typ: "String",
		build: func(share []R) {
			buf = buf[:0]
			for _, r := range share {
				buf = append(buf, get(r))
			}
		},
		hand: func(dst column.Interface, _ *wire) error { _, err := dst.Append(buf); return err },
	}
}

// strsCol is an Array(String) column; a nil slice is an empty array.
func strsCol[R any](name string, get func(R) []string) typedColumn[R] {
	var rows [][]string
	return typedColumn[R]{name: name, typ: "Array(String)",
		build: func(share []R) {
			rows = rows[:0]
			for _, r := range share {
				rows = append(rows, get(r))
			}
		},
		hand: func(dst column.Interface, _ *wire) error {
			var cells stringCells
			for _, v := range rows {
				if err := dst.AppendRow(cells.of(v)); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// valueCol is a column of ch-go's type c, one value a row: uuidCol, u8Col and the
// others name which.
func valueCol[R, T any](name string, c chproto.ColumnOf[T], get func(R) T) typedColumn[R] {
	return wireCol(name, c, func(r R) { c.Append(get(r)) })
}

func uuidCol[R any](name string, get func(R) uuid.UUID) typedColumn[R] {
	return valueCol(name, new(chproto.ColUUID), get)
}

func u8Col[R any](name string, get func(R) uint8) typedColumn[R] {
	return valueCol(name, new(chproto.ColUInt8), get)
}

func u16Col[R any](name string, get func(R) uint16) typedColumn[R] {
	return valueCol(name, new(chproto.ColUInt16), get)
}

func u32Col[R any](name string, get func(R) uint32) typedColumn[R] {
	return valueCol(name, new(chproto.ColUInt32), get)
}

func u64Col[R any](name string, get func(R) uint64) typedColumn[R] {
	return valueCol(name, new(chproto.ColUInt64), get)
}

func f32Col[R any](name string, get func(R) float32) typedColumn[R] {
	return valueCol(name, new(chproto.ColFloat32), get)
}

// timeCol is a DateTime column: whole seconds, as both ClickHouse versions store.
func timeCol[R any](name string, get func(R) time.Time) typedColumn[R] {
	return valueCol(name, new(chproto.ColDateTime), get)
}

// nullTimeCol is a Nullable(DateTime) column; a nil time is NULL.
func nullTimeCol[R any](name string, get func(R) *time.Time) typedColumn[R] {
	c := chproto.NewColNullable[time.Time](new(chproto.ColDateTime))
	return wireCol(name, c, func(r R) {
		if t := get(r); t != nil {
			c.Append(chproto.NewNullable(*t))
			return
		}
		c.Append(chproto.Null[time.Time]())
	})
}

// floatsCol is an Array(Float32) column: a row's vector is appended in one copy.
func floatsCol[R any](name string, get func(R) []float32) typedColumn[R] {
	return valueCol(name, chproto.NewArray[float32](new(chproto.ColFloat32)), get)
}

// u16sCol is an Array(UInt16) column.
func u16sCol[R any](name string, get func(R) []uint16) typedColumn[R] {
	return valueCol(name, chproto.NewArray[uint16](new(chproto.ColUInt16)), get)
}
