package mem0

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// mem0's filters grammar (v2/v3 search and list): an object whose keys all hold (AND),
// "AND"/"OR"/"NOT" over lists of such objects, and per field either a value (equality,
// "*" for any) or operators: in, ne, gt, gte, lt, lte, contains, icontains.
//
// Fields: user_id, agent_id, app_id, run_id, created_at, updated_at, categories,
// metadata (an object of key: value-or-operators). A filter is compiled to a predicate
// over records, and its top-level equalities on the entity ids are pushed down to Loom
// (the namespace, the identity filters), so Loom narrows what the predicate then checks.

type predicate interface{ match(r *record) bool }

type allOf []predicate

func (a allOf) match(r *record) bool {
	for _, p := range a {
		if !p.match(r) {
			return false
		}
	}
	return true
}

type anyOf []predicate

func (a anyOf) match(r *record) bool {
	for _, p := range a {
		if p.match(r) {
			return true
		}
	}
	return false
}

type noneOf []predicate

func (n noneOf) match(r *record) bool { return !anyOf(n).match(r) }

// cond is one field's operator and operand.
type cond struct {
	field, op string
	arg       any
	get       func(r *record) any
}

func (c cond) match(r *record) bool { return compare(c.op, c.get(r), c.arg) }

// filterError is a filter the facade cannot read: a 400 naming it.
type filterError struct{ msg string }

func (e *filterError) Error() string { return e.msg }

func badFilter(format string, args ...any) error { return &filterError{fmt.Sprintf(format, args...)} }

// plan is a compiled filter: what Loom narrows by, and what the facade checks after.
type plan struct {
	entities              // equalities of the top-level conjunction, pushed down
	provenance provenance // Loom's own filters of the top-level conjunction, pushed down
	check      allOf      // the whole filter, checked on every record
}

func compile(filters map[string]any) (plan, error) {
	var p plan
	pred, err := compileObject(filters)
	if err != nil {
		return p, err
	}
	p.check = allOf{pred}
	p.pushDown(filters)
	return p, nil
}

// pushDown takes the entity equalities that every match must satisfy: the top-level
// keys and those of objects in a top-level AND.
func (p *plan) pushDown(filters map[string]any) {
	for k, v := range filters {
		if s, ok := v.(string); ok && s != "*" {
			switch k {
			case "user_id":
				p.UserID = s
			case "agent_id":
				p.AgentID = s
			case "run_id":
				p.RunID = s
			case "app_id":
				p.AppID = s
			}
		}
		if _, ok := provenanceOps[k]; ok {
			p.pushProvenance(k, v)
		}
		if k == "AND" {
			if list, ok := v.([]any); ok {
				for _, item := range list {
					if m, ok := item.(map[string]any); ok {
						p.pushDown(m)
					}
				}
			}
		}
	}
}

func compileObject(m map[string]any) (predicate, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var all allOf
	for _, k := range keys {
		v := m[k]
		switch k {
		case "AND", "OR", "NOT":
			list, ok := v.([]any)
			if !ok {
				return nil, badFilter("filters: %s takes a list of filter objects", k)
			}
			var ps []predicate
			for i, item := range list {
				obj, ok := item.(map[string]any)
				if !ok {
					return nil, badFilter("filters: %s[%d] is not an object", k, i)
				}
				p, err := compileObject(obj)
				if err != nil {
					return nil, err
				}
				ps = append(ps, p)
			}
			switch k {
			case "AND":
				all = append(all, allOf(ps))
			case "OR":
				all = append(all, anyOf(ps))
			default:
				all = append(all, noneOf(ps))
			}
		case "metadata":
			md, ok := v.(map[string]any)
			if !ok {
				return nil, badFilter("filters: metadata takes an object of key: value")
			}
			for _, mk := range sortedKeys(md) {
				p, err := fieldConds("metadata."+mk, md[mk], func(r *record) any { return r.Metadata[mk] })
				if err != nil {
					return nil, err
				}
				all = append(all, p)
			}
		case "entities", "source_class", "verified":
			p, err := provenanceConds(k, v)
			if err != nil {
				return nil, err
			}
			all = append(all, p)
		default:
			get, ok := fieldGetters[k]
			if !ok {
				return nil, badFilter("filters: field %q is not supported (user_id, agent_id, app_id, run_id, created_at, updated_at, categories, metadata, entities, source_class, verified)", k)
			}
			p, err := fieldConds(k, v, get)
			if err != nil {
				return nil, err
			}
			all = append(all, p)
		}
	}
	return all, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func str(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

var fieldGetters = map[string]func(r *record) any{
	"user_id":    func(r *record) any { return str(r.UserID) },
	"agent_id":   func(r *record) any { return str(r.AgentID) },
	"app_id":     func(r *record) any { return str(r.AppID) },
	"run_id":     func(r *record) any { return str(r.RunID) },
	"created_at": func(r *record) any { return r.CreatedAt },
	"updated_at": func(r *record) any { return r.UpdatedAt },
	"categories": func(r *record) any { return r.Categories },
}

var operators = map[string]bool{"in": true, "ne": true, "gt": true, "gte": true, "lt": true, "lte": true, "contains": true, "icontains": true, "eq": true}

// fieldConds compiles one field's value: a plain value is equality, an object of
// operators is their conjunction.
func fieldConds(field string, v any, get func(r *record) any) (predicate, error) {
	ops, isObj := v.(map[string]any)
	if !isObj {
		return cond{field: field, op: "eq", arg: v, get: get}, nil
	}
	var all allOf
	for _, op := range sortedKeys(ops) {
		if !operators[op] {
			return nil, badFilter("filters: %s: operator %q is not supported (in, ne, gt, gte, lt, lte, contains, icontains)", field, op)
		}
		arg := ops[op]
		if op == "in" {
			if _, ok := arg.([]any); !ok {
				return nil, badFilter("filters: %s: in takes a list", field)
			}
		}
		if strings.HasSuffix(field, "_at") && (op == "gt" || op == "gte" || op == "lt" || op == "lte") {
			t, err := boundOf(op, arg)
			if err != nil {
				return nil, badFilter("filters: %s.%s: %v", field, op, err)
			}
			arg = t
		}
		all = append(all, cond{field: field, op: op, arg: arg, get: get})
	}
	return all, nil
}

// boundOf reads a time bound: RFC 3339, or a date, which lte and gt take to its end
// (created_at <= 2024-07-31 holds all of the 31st).
func boundOf(op string, v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, fmt.Errorf("want a date or an RFC 3339 time")
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a date (2024-07-01) nor an RFC 3339 time", s)
	}
	if op == "lte" || op == "gt" {
		d = d.AddDate(0, 0, 1).Add(-time.Nanosecond)
	}
	return d, nil
}

func compare(op string, have, arg any) bool {
	switch op {
	case "eq":
		if s, ok := arg.(string); ok && s == "*" {
			return have != nil
		}
		return equal(have, arg)
	case "ne":
		return !equal(have, arg)
	case "in":
		for _, a := range arg.([]any) {
			if equal(have, a) {
				return true
			}
		}
		return false
	case "contains", "icontains":
		return contains(have, arg, op == "icontains")
	}
	if t, ok := have.(time.Time); ok {
		b := arg.(time.Time)
		switch op {
		case "gt":
			return t.After(b)
		case "gte":
			return !t.Before(b)
		case "lt":
			return t.Before(b)
		default:
			return !t.After(b)
		}
	}
	h, okH := number(have)
	a, okA := number(arg)
	if !okH || !okA {
		return false
	}
	switch op {
	case "gt":
		return h > a
	case "gte":
		return h >= a
	case "lt":
		return h < a
	default:
		return h <= a
	}
}

// equal compares as JSON does; a list (categories) equals a value it holds.
func equal(have, arg any) bool {
	if list, ok := have.([]string); ok {
		for _, s := range list {
			if s == arg {
				return true
			}
		}
		return false
	}
	if h, ok := number(have); ok {
		a, ok := number(arg)
		return ok && h == a
	}
	return reflect.DeepEqual(have, arg)
}

func contains(have, arg any, fold bool) bool {
	want, ok := arg.(string)
	if !ok {
		return false
	}
	norm := func(s string) string {
		if fold {
			return strings.ToLower(s)
		}
		return s
	}
	switch h := have.(type) {
	case string:
		return strings.Contains(norm(h), norm(want))
	case []string:
		for _, s := range h {
			if norm(s) == norm(want) {
				return true
			}
		}
	}
	return false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case int:
		return float64(n), true
	}
	return 0, false
}
