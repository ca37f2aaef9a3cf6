package projector

import (
	"strings"
	"time"

	chproto "github.com/ClickHouse/ch-go/proto"
	"github.com/google/uuid"
)

// An insert's columns built typed. clickhouse-go (2.51) takes a row at a time through
// `any`s: every scalar boxed (a heap allocation for most), every value type-switched,
// and an array's elements appended one interface call each (two 384-dim vectors a
// row). ch-go's proto columns, which the driver's own columns wrap, append a typed
// value, a whole vector in one copy. A typedColumn is one such column with how a row
// fills it; sendTyped hands the columns to the driver in its wire format.

// typedColumn is one column of an insert whose rows are R: its name in the statement,
// the ch-go column it builds and how a row appends to it.
type typedColumn[R any] struct {
	name string
	col  chproto.Column
	add  func(R)
}

// columnNames is the statement's column list of cols, in order.
func columnNames[R any](cols []typedColumn[R]) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

func strCol[R any](name string, get func(R) string) typedColumn[R] {
	c := new(chproto.ColStr)
	return typedColumn[R]{name, c, func(r R) { c.Append(get(r)) }}
}

func bytesCol[R any](name string, get func(R) []byte) typedColumn[R] {
	c := new(chproto.ColStr)
	return typedColumn[R]{name, c, func(r R) { c.AppendBytes(get(r)) }}
}

func uuidCol[R any](name string, get func(R) uuid.UUID) typedColumn[R] {
	c := new(chproto.ColUUID)
	return typedColumn[R]{name, c, func(r R) { c.Append(get(r)) }}
}

func u8Col[R any](name string, get func(R) uint8) typedColumn[R] {
	c := new(chproto.ColUInt8)
	return typedColumn[R]{name, c, func(r R) { c.Append(get(r)) }}
}

func u16Col[R any](name string, get func(R) uint16) typedColumn[R] {
	c := new(chproto.ColUInt16)
	return typedColumn[R]{name, c, func(r R) { c.Append(get(r)) }}
}

func u32Col[R any](name string, get func(R) uint32) typedColumn[R] {
	c := new(chproto.ColUInt32)
	return typedColumn[R]{name, c, func(r R) { c.Append(get(r)) }}
}

func u64Col[R any](name string, get func(R) uint64) typedColumn[R] {
	c := new(chproto.ColUInt64)
	return typedColumn[R]{name, c, func(r R) { c.Append(get(r)) }}
}

func f32Col[R any](name string, get func(R) float32) typedColumn[R] {
	c := new(chproto.ColFloat32)
	return typedColumn[R]{name, c, func(r R) { c.Append(get(r)) }}
}

// timeCol is a DateTime column: whole seconds, as both ClickHouse versions store.
func timeCol[R any](name string, get func(R) time.Time) typedColumn[R] {
	c := new(chproto.ColDateTime)
	return typedColumn[R]{name, c, func(r R) { c.Append(get(r)) }}
}

// nullTimeCol is a Nullable(DateTime) column; a nil time is NULL.
func nullTimeCol[R any](name string, get func(R) *time.Time) typedColumn[R] {
	c := chproto.NewColNullable[time.Time](new(chproto.ColDateTime))
	return typedColumn[R]{name, c, func(r R) {
		if t := get(r); t != nil {
			c.Append(chproto.NewNullable(*t))
			return
		}
		c.Append(chproto.Null[time.Time]())
	}}
}

// strsCol is an Array(String) column; a nil slice is an empty array.
func strsCol[R any](name string, get func(R) []string) typedColumn[R] {
	c := chproto.NewArray[string](new(chproto.ColStr))
	return typedColumn[R]{name, c, func(r R) { c.Append(get(r)) }}
}

// floatsCol is an Array(Float32) column: a row's vector is appended in one copy.
func floatsCol[R any](name string, get func(R) []float32) typedColumn[R] {
	c := chproto.NewArray[float32](new(chproto.ColFloat32))
	return typedColumn[R]{name, c, func(r R) { c.Append(get(r)) }}
}

// u16sCol is an Array(UInt16) column.
func u16sCol[R any](name string, get func(R) []uint16) typedColumn[R] {
	c := chproto.NewArray[uint16](new(chproto.ColUInt16))
	return typedColumn[R]{name, c, func(r R) { c.Append(get(r)) }}
}
