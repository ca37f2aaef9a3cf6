package dataset

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loomplane/loom/knowledge/parse"
)

// Result is a query's answer. Cells are int64 (int, count), float64 (float, avg,
// a sum past int64), string (string and date cells as the table has them) or nil
// (an empty cell, an aggregate over none).
type Result struct {
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`
	// Truncated says more rows matched than the limit let through.
	Truncated bool `json:"truncated"`
}

var ops = map[string]bool{"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true, "contains": true, "in": true}
var fns = map[string]bool{"count": true, "sum": true, "avg": true, "min": true, "max": true}

// Evaluate answers q over the table under its approved schema. A refused query is a
// *QueryError naming the field; ctx's error when it ended first.
func Evaluate(ctx context.Context, t parse.Table, s Schema, q Query, lim Limits) (*Result, error) {
	lim = lim.withDefaults()
	cols, err := bind(t, s)
	if err != nil {
		return nil, err
	}
	plan, err := compile(cols, q, lim)
	if err != nil {
		return nil, err
	}
	var out []row
	if plan.grouped {
		out, err = plan.groups(ctx, t.Rows)
	} else {
		out, err = plan.rows(ctx, t.Rows)
	}
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, plan.order)
	res := &Result{Columns: plan.outNames, Rows: make([][]any, 0, min(len(out), plan.limit))}
	if len(out) > plan.limit {
		out, res.Truncated = out[:plan.limit], true
	}
	for _, r := range out {
		cells := make([]any, len(r))
		for i, v := range r {
			cells[i] = v.out()
		}
		res.Rows = append(res.Rows, cells)
	}
	return res, nil
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxRows <= 0 {
		l.MaxRows = d.MaxRows
	}
	if l.MaxGroups <= 0 {
		l.MaxGroups = d.MaxGroups
	}
	if l.MaxFilters <= 0 {
		l.MaxFilters = d.MaxFilters
	}
	if l.MaxInValues <= 0 {
		l.MaxInValues = d.MaxInValues
	}
	return l
}

// column is a schema column bound to its cells' index in the table.
type column struct {
	name  string
	typ   string
	index int
}

func bind(t parse.Table, s Schema) (map[string]column, error) {
	cols := make(map[string]column, len(s.Columns))
	for i, c := range s.Columns {
		field := fmt.Sprintf("schema.columns[%d]", i)
		index := slices.Index(t.Columns, c.Name)
		if index < 0 {
			return nil, refuse(field+".name", "the table has no column %q", c.Name)
		}
		switch c.Type {
		case TypeInt, TypeFloat, TypeDate, TypeString:
		default:
			return nil, refuse(field+".type", "%q is not a type (int, float, date, string)", c.Type)
		}
		cols[c.Name] = column{name: c.Name, typ: c.Type, index: index}
	}
	if len(cols) == 0 {
		return nil, refuse("schema.columns", "the schema has no columns")
	}
	return cols, nil
}

// A value is a cell or a query's operand, typed.
type kind uint8

const (
	null kind = iota
	intKind
	floatKind
	dateKind
	stringKind
)

type value struct {
	k kind
	i int64
	f float64
	t time.Time
	s string // a string's text, a date's text as written
}

func (v value) out() any {
	switch v.k {
	case intKind:
		return v.i
	case floatKind:
		return v.f
	case dateKind, stringKind:
		return v.s
	}
	return nil
}

// typed reads a cell as its column's type; a cell that does not read is null.
func typed(cell, typ string) value {
	trimmed := strings.TrimSpace(cell)
	if trimmed == "" {
		return value{}
	}
	switch typ {
	case TypeInt:
		if n, ok := parseInt(trimmed); ok {
			return value{k: intKind, i: n}
		}
		if f, ok := parseFloat(trimmed); ok {
			return value{k: floatKind, f: f}
		}
	case TypeFloat:
		if f, ok := parseFloat(trimmed); ok {
			return value{k: floatKind, f: f}
		}
	case TypeDate:
		if t, ok := parseDate(trimmed); ok {
			return value{k: dateKind, t: t, s: cell}
		}
	default:
		return value{k: stringKind, s: cell}
	}
	return value{}
}

// compare orders two non-null values of one column: numbers by value, dates by
// instant, strings by bytes.
func compare(a, b value) int {
	switch {
	case a.k == intKind && b.k == intKind:
		return cmp.Compare(a.i, b.i)
	case (a.k == intKind || a.k == floatKind) && (b.k == intKind || b.k == floatKind):
		return cmp.Compare(a.num(), b.num())
	case a.k == dateKind && b.k == dateKind:
		return a.t.Compare(b.t)
	}
	return strings.Compare(a.s, b.s)
}

func (v value) num() float64 {
	if v.k == intKind {
		return float64(v.i)
	}
	return v.f
}

type filter struct {
	col    column
	op     string
	values []value // one, or an in's list
}

func (f filter) holds(v value) bool {
	if v.k == null {
		return false
	}
	switch f.op {
	case "contains":
		return strings.Contains(v.s, f.values[0].s)
	case "in":
		return slices.ContainsFunc(f.values, func(w value) bool { return compare(v, w) == 0 })
	}
	c := compare(v, f.values[0])
	switch f.op {
	case "eq":
		return c == 0
	case "ne":
		return c != 0
	case "lt":
		return c < 0
	case "le":
		return c <= 0
	case "gt":
		return c > 0
	}
	return c >= 0 // ge
}

// operand reads a filter's JSON value as a value of the column's type.
func operand(raw json.RawMessage, col column, field string) (value, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return value{}, refuse(field, "a value is required")
	}
	switch col.typ {
	case TypeInt, TypeFloat:
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return value{}, refuse(field, "column %q is a number: the value must be a JSON number", col.name)
		}
		if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return value{k: intKind, i: i}, nil
		}
		f, err := n.Float64()
		if err != nil {
			return value{}, refuse(field, "%s is not a number this column can hold", n)
		}
		return value{k: floatKind, f: f}, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return value{}, refuse(field, "column %q is a %s: the value must be a JSON string", col.name, col.typ)
	}
	if col.typ == TypeDate {
		t, ok := parseDate(strings.TrimSpace(s))
		if !ok {
			return value{}, refuse(field, "%q is not a date (YYYY-MM-DD, or RFC 3339)", s)
		}
		return value{k: dateKind, t: t, s: s}, nil
	}
	return value{k: stringKind, s: s}, nil
}

type aggregate struct {
	fn  string
	col *column // nil for count of rows
}

// plan is a query checked against the schema.
type plan struct {
	cols      map[string]column
	filters   []filter
	grouped   bool
	groupBy   []column
	aggs      []aggregate
	outNames  []string
	outCols   []column // the output columns of an ungrouped query
	orderBy   []int    // output column indexes
	orderDesc []bool
	limit     int
	lim       Limits
}

func compile(cols map[string]column, q Query, lim Limits) (*plan, error) {
	p := &plan{cols: cols, lim: lim, limit: q.Limit}
	known := func(name, field string) (column, error) {
		c, ok := cols[name]
		if !ok {
			return column{}, refuse(field, "no column %q in the dataset's schema", name)
		}
		return c, nil
	}
	if len(q.Filters) > lim.MaxFilters {
		return nil, refuse("filters", "at most %d filters", lim.MaxFilters)
	}
	for i, f := range q.Filters {
		field := fmt.Sprintf("filters[%d]", i)
		c, err := known(f.Column, field+".column")
		if err != nil {
			return nil, err
		}
		fl, err := compileFilter(f, c, field, lim)
		if err != nil {
			return nil, err
		}
		p.filters = append(p.filters, fl)
	}
	p.grouped = len(q.GroupBy) > 0 || len(q.Aggregates) > 0
	for i, name := range q.GroupBy {
		c, err := known(name, fmt.Sprintf("group_by[%d]", i))
		if err != nil {
			return nil, err
		}
		p.groupBy = append(p.groupBy, c)
		p.outNames = append(p.outNames, c.name)
	}
	for i, a := range q.Aggregates {
		field := fmt.Sprintf("aggregates[%d]", i)
		if !fns[a.Fn] {
			return nil, refuse(field+".fn", "%q is not an aggregate (count, sum, avg, min, max)", a.Fn)
		}
		agg := aggregate{fn: a.Fn}
		label := a.Fn
		if a.Column != "" || a.Fn != "count" {
			c, err := known(a.Column, field+".column")
			if err != nil {
				return nil, err
			}
			if (a.Fn == "sum" || a.Fn == "avg") && c.typ != TypeInt && c.typ != TypeFloat {
				return nil, refuse(field+".fn", "%s applies to int and float columns; %q is %s", a.Fn, c.name, c.typ)
			}
			agg.col = &c
			label = a.Fn + "(" + c.name + ")"
		}
		p.aggs = append(p.aggs, agg)
		p.outNames = append(p.outNames, label)
	}
	if !p.grouped {
		for _, c := range cols {
			p.outCols = append(p.outCols, c)
		}
		slices.SortFunc(p.outCols, func(a, b column) int { return cmp.Compare(a.index, b.index) })
		for _, c := range p.outCols {
			p.outNames = append(p.outNames, c.name)
		}
	}
	for i, o := range q.OrderBy {
		at := slices.Index(p.outNames, o.Column)
		if at < 0 {
			return nil, refuse(fmt.Sprintf("order_by[%d].column", i), "%q is not a column of the answer (%s)", o.Column, strings.Join(p.outNames, ", "))
		}
		p.orderBy = append(p.orderBy, at)
		p.orderDesc = append(p.orderDesc, o.Desc)
	}
	switch {
	case q.Limit < 0 || q.Limit > lim.MaxRows:
		return nil, refuse("limit", "the limit is 1 to %d", lim.MaxRows)
	case q.Limit == 0:
		p.limit = min(defaultLimit, lim.MaxRows)
	}
	return p, nil
}

// compileFilter checks one filter against its column and reads its operands.
func compileFilter(f Filter, c column, field string, lim Limits) (filter, error) {
	if !ops[f.Op] {
		return filter{}, refuse(field+".op", "%q is not an op (eq, ne, lt, le, gt, ge, contains, in)", f.Op)
	}
	fl := filter{col: c, op: f.Op}
	switch f.Op {
	case "contains":
		if c.typ != TypeString {
			return filter{}, refuse(field+".op", "contains applies to string columns; %q is %s", c.name, c.typ)
		}
		v, err := operand(f.Value, c, field+".value")
		if err != nil {
			return filter{}, err
		}
		fl.values = []value{v}
	case "in":
		var list []json.RawMessage
		if err := json.Unmarshal(f.Value, &list); err != nil || len(list) == 0 {
			return filter{}, refuse(field+".value", "in takes a non-empty array of values")
		}
		if len(list) > lim.MaxInValues {
			return filter{}, refuse(field+".value", "in takes at most %d values", lim.MaxInValues)
		}
		for j, raw := range list {
			v, err := operand(raw, c, fmt.Sprintf("%s.value[%d]", field, j))
			if err != nil {
				return filter{}, err
			}
			fl.values = append(fl.values, v)
		}
	default:
		v, err := operand(f.Value, c, field+".value")
		if err != nil {
			return filter{}, err
		}
		fl.values = []value{v}
	}
	return fl, nil
}

type row []value

// matches reports whether a table row passes every filter.
func (p *plan) matches(cells []string) bool {
	for _, f := range p.filters {
		if !f.holds(typed(cells[f.col.index], f.col.typ)) {
			return false
		}
	}
	return true
}

func (p *plan) rows(ctx context.Context, cells [][]string) ([]row, error) {
	var out []row
	for i, r := range cells {
		if i&4095 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !p.matches(r) {
			continue
		}
		o := make(row, len(p.outCols))
		for j, c := range p.outCols {
			o[j] = typed(r[c.index], c.typ)
		}
		out = append(out, o)
	}
	return out, nil
}

// group is one group's key values and its aggregates' state.
type group struct {
	key  []value
	aggs []aggState
}

type aggState struct {
	count    int64
	sumInt   int64
	sumFloat float64
	overflow bool // the int sum left int64: summed as float from then on
	sawFloat bool
	best     value
}

func (p *plan) groups(ctx context.Context, cells [][]string) ([]row, error) {
	byKey := map[string]*group{}
	var order []*group
	var key strings.Builder
	for i, r := range cells {
		if i&4095 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !p.matches(r) {
			continue
		}
		key.Reset()
		vals := make([]value, len(p.groupBy))
		for j, c := range p.groupBy {
			vals[j] = typed(r[c.index], c.typ)
			// Length-prefixed, so no cell's text can run into the next one's.
			fmt.Fprintf(&key, "%d:%d:%s", vals[j].k, len(groupText(vals[j])), groupText(vals[j]))
		}
		g := byKey[key.String()]
		if g == nil {
			if len(order) == p.lim.MaxGroups {
				return nil, refuse("group_by", "the query makes more than %d groups: filter first, or group by fewer columns", p.lim.MaxGroups)
			}
			g = &group{key: vals, aggs: make([]aggState, len(p.aggs))}
			byKey[key.String()] = g
			order = append(order, g)
		}
		for j, a := range p.aggs {
			g.aggs[j].add(a, r)
		}
	}
	if len(order) == 0 && len(p.groupBy) == 0 {
		// Aggregates over no rows: one row (a count of 0).
		order = append(order, &group{aggs: make([]aggState, len(p.aggs))})
	}
	out := make([]row, 0, len(order))
	for _, g := range order {
		o := append(make(row, 0, len(p.outNames)), g.key...)
		for j, a := range p.aggs {
			o = append(o, g.aggs[j].result(a))
		}
		out = append(out, o)
	}
	return out, nil
}

// groupText is the canonical text of a group key value: equal values, equal text.
func groupText(v value) string {
	switch v.k {
	case intKind:
		return strconv.FormatInt(v.i, 10)
	case floatKind:
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	case dateKind:
		return v.t.UTC().Format(time.RFC3339Nano)
	}
	return v.s
}

func (s *aggState) add(a aggregate, cells []string) {
	if a.col == nil {
		s.count++
		return
	}
	v := typed(cells[a.col.index], a.col.typ)
	if v.k == null {
		return
	}
	s.count++
	switch a.fn {
	case "sum", "avg":
		if v.k == intKind && !s.overflow {
			if sum := s.sumInt + v.i; (v.i > 0 && sum < s.sumInt) || (v.i < 0 && sum > s.sumInt) {
				s.overflow, s.sumFloat = true, s.sumFloat+float64(s.sumInt)+float64(v.i)
				s.sumInt = 0
			} else {
				s.sumInt = sum
			}
		} else {
			s.sumFloat += v.num()
			s.sawFloat = s.sawFloat || v.k == floatKind
		}
	case "min":
		if s.best.k == null || compare(v, s.best) < 0 {
			s.best = v
		}
	case "max":
		if s.best.k == null || compare(v, s.best) > 0 {
			s.best = v
		}
	}
}

func (s *aggState) result(a aggregate) value {
	switch a.fn {
	case "count":
		return value{k: intKind, i: s.count}
	case "sum":
		if s.count == 0 {
			return value{}
		}
		if !s.overflow && !s.sawFloat {
			return value{k: intKind, i: s.sumInt}
		}
		return value{k: floatKind, f: s.sumFloat + float64(s.sumInt)}
	case "avg":
		if s.count == 0 {
			return value{}
		}
		avg := (s.sumFloat + float64(s.sumInt)) / float64(s.count)
		if math.IsInf(avg, 0) || math.IsNaN(avg) {
			return value{}
		}
		return value{k: floatKind, f: avg}
	}
	return s.best
}

// order sorts the answer by order_by, nulls last whichever the direction.
func (p *plan) order(a, b row) int {
	for i, at := range p.orderBy {
		x, y := a[at], b[at]
		var c int
		switch {
		case x.k == null && y.k == null:
			continue
		case x.k == null:
			return 1
		case y.k == null:
			return -1
		default:
			c = compare(x, y)
		}
		if p.orderDesc[i] {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}
