package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Query is knowledge.query's grammar:
//
//	{"filters":  [{"column": "city", "op": "eq", "value": "Oslo"}, …],   all must hold
//	 "group_by": ["city"],
//	 "aggregates": [{"fn": "sum", "column": "qty"}, {"fn": "count"}],
//	 "order_by": [{"column": "sum(qty)", "desc": true}],
//	 "limit": 10}
//
// ops: eq, ne, lt, le, gt, ge (a value of the column's type: a number for int and
// float, a date string for date, a string for string), contains (a string column,
// a literal, case-sensitive substring), in (an array of such values). An empty cell
// is null: no filter holds on it and aggregates skip it. fns: count (rows, or a
// column's non-null cells), sum and avg (int, float), min and max (any type).
// Without group_by and aggregates the answer is the filtered rows, every column;
// with group_by alone, the distinct groups. An aggregate's output column is named
// fn(column), or count; order_by names output columns; nulls sort last.
type Query struct {
	Filters    []Filter    `json:"filters"`
	GroupBy    []string    `json:"group_by"`
	Aggregates []Aggregate `json:"aggregates"`
	OrderBy    []Order     `json:"order_by"`
	Limit      int         `json:"limit"`
}

// Filter is one condition on a column.
type Filter struct {
	Column string          `json:"column"`
	Op     string          `json:"op"`
	Value  json.RawMessage `json:"value"`
}

// Aggregate is one aggregate of the answer; count needs no column.
type Aggregate struct {
	Fn     string `json:"fn"`
	Column string `json:"column,omitempty"`
}

// Order is one sort key of the answer.
type Order struct {
	Column string `json:"column"`
	Desc   bool   `json:"desc"`
}

// Limits bound what one query may cost and return.
type Limits struct {
	MaxRows     int // the most rows an answer holds; a larger limit is refused
	MaxGroups   int // the most groups a query may make
	MaxFilters  int
	MaxInValues int // the most values one in filter lists
}

// DefaultLimits: answers of at most 1,000 rows (100 when the query names no
// limit), 10,000 groups, 32 filters, 1,000 values in an in.
func DefaultLimits() Limits {
	return Limits{MaxRows: 1000, MaxGroups: 10000, MaxFilters: 32, MaxInValues: 1000}
}

// defaultLimit is a query's limit when it names none.
const defaultLimit = 100

// QueryError is a query the grammar or the schema refuses; Field is where, as a
// path into the query ("filters[1].op").
type QueryError struct {
	Field   string
	Message string
}

func (e *QueryError) Error() string { return e.Field + ": " + e.Message }

func refuse(field, format string, args ...any) error {
	return &QueryError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// ParseQuery reads a query strictly: an unknown field or trailing data is refused.
func ParseQuery(body []byte) (Query, error) {
	var q Query
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		field := "query"
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			field = te.Field
		} else if _, name, ok := strings.Cut(err.Error(), "unknown field "); ok {
			field = strings.Trim(name, `"`)
		}
		return Query{}, refuse(field, "the query is not valid JSON of the grammar: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Query{}, refuse("query", "the query has data after its object")
	}
	return q, nil
}
