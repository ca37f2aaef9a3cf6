// Package dataset answers the knowledge plane's dataset queries (knowledge.query):
// a table found in a document, an approved schema over it, and a query in a small
// JSON grammar of filters, grouping, aggregates, order and limit, evaluated here in
// Go over the table's cells. No query becomes SQL, so nothing a caller or a cell
// holds is ever read as code: a value is compared as the value it is.
//
// It is pure code: no store, no network.
package dataset

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/loomplane/loom/knowledge/parse"
)

// The column types a schema names.
const (
	TypeInt    = "int"
	TypeFloat  = "float"
	TypeDate   = "date"
	TypeString = "string"
)

// Column is one column of a schema: its name in the table and its type.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Schema is the columns a dataset serves, with their types.
type Schema struct {
	Columns []Column `json:"columns"`
}

// Infer proposes a table's schema for approval: each column's type is the narrowest
// of int, float, date and string that every non-empty cell of it reads as (a column
// of empty cells is a string).
func Infer(t parse.Table) Schema {
	s := Schema{Columns: make([]Column, len(t.Columns))}
	for i, name := range t.Columns {
		isInt, isFloat, isDate, any := true, true, true, false
		for _, row := range t.Rows {
			cell := strings.TrimSpace(row[i])
			if cell == "" {
				continue
			}
			any = true
			if isInt {
				_, isInt = parseInt(cell)
			}
			if isFloat {
				_, isFloat = parseFloat(cell)
			}
			if isDate {
				_, isDate = parseDate(cell)
			}
			if !isInt && !isFloat && !isDate {
				break
			}
		}
		typ := TypeString
		switch {
		case !any:
		case isInt:
			typ = TypeInt
		case isFloat:
			typ = TypeFloat
		case isDate:
			typ = TypeDate
		}
		s.Columns[i] = Column{Name: name, Type: typ}
	}
	return s
}

// A number is plain decimal: no thousands separators, no NaN or Inf.
var (
	intPattern   = regexp.MustCompile(`^[+-]?[0-9]+$`)
	floatPattern = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
)

func parseInt(s string) (int64, bool) {
	if !intPattern.MatchString(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func parseFloat(s string) (float64, bool) {
	if !floatPattern.MatchString(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// dateLayouts are the forms a date cell may take; a date compares as the instant
// it names (UTC when it names no zone).
var dateLayouts = []string{"2006-01-02", time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006/01/02"}

func parseDate(s string) (time.Time, bool) {
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
