package projector

// clickhouse-go (2.51) appends an array column's elements one at a time through an
// `any`. A float32 or a string put in an `any` is a heap allocation; a pointer is not.
// The cells below hand the driver pointers into a row's own slices instead: the string
// arrays of the typed inserts (strsCol) and the row path's arrays (the chunks' and the
// documents' vectors). The driver copies each value out as it appends, so a cells'
// buffer is reused from row to row; the columns' contents are unchanged.

// floatCells holds one array column's pointers for the row being appended.
type floatCells struct{ buf []*float32 }

// of points at each element of v, in order; valid until the next call.
func (c *floatCells) of(v []float32) []*float32 {
	c.buf = c.buf[:0]
	for i := range v {
		c.buf = append(c.buf, &v[i])
	}
	if c.buf == nil {
		c.buf = []*float32{}
	}
	return c.buf
}

// stringCells is floatCells for an Array(String) column.
type stringCells struct{ buf []*string }

// of points at each element of v, in order; valid until the next call.
func (c *stringCells) of(v []string) []*string {
	c.buf = c.buf[:0]
	for i := range v {
		c.buf = append(c.buf, &v[i])
	}
	if c.buf == nil {
		c.buf = []*string{}
	}
	return c.buf
}
