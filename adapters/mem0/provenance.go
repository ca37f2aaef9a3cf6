package mem0

import (
	"slices"
	"strings"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/memrow"
)

// Loom's search filters mem0's grammar has no field for: entities (rows naming an
// entity, names compared as Loom compares them, case and spacing ignored),
// source_class and verified. They take the grammar's operators that mean something
// for them (entities: a value, contains, icontains, in, ne; source_class: a value, in,
// ne; verified: true or false, ne); any other operator, or a value Loom would refuse,
// answers 400 naming the field. Like the entity ids, those every match must satisfy
// are sent to Loom's search as its own filters, so they narrow the whole pool rather
// than the hits Loom answered; the facade still checks the whole filter on each record.

// provenance is what of a filter is pushed down to Loom's search filters.
type provenance struct {
	Entities    []string
	SourceClass []string
	Verified    *bool
}

// provenanceOps are the operators each provenance field takes ("eq" is a plain value).
var provenanceOps = map[string][]string{
	"entities":     {"eq", "contains", "icontains", "in", "ne"},
	"source_class": {"eq", "in", "ne"},
	"verified":     {"eq", "ne"},
}

var provenanceGetters = map[string]func(r *record) any{
	"entities": func(r *record) any {
		names := make([]string, len(r.Loom.Entities))
		for i, e := range r.Loom.Entities {
			names[i] = memrow.EntityName(e)
		}
		return names
	},
	"source_class": func(r *record) any { return r.Loom.SourceClass },
	"verified":     func(r *record) any { return r.Loom.Verified },
}

// sourceClasses are the source classes Loom's rows hold.
var sourceClasses = []string{"direct", "derived", "external", "imported"}

// provenanceArg checks one operand of a provenance field and returns it as the record
// holds it (an entity name in canonical form).
func provenanceArg(field, op string, v any) (any, error) {
	if op == "in" {
		list, ok := v.([]any)
		if !ok {
			return nil, badFilter("filters: %s: in takes a list", field)
		}
		out := make([]any, len(list))
		for i, item := range list {
			a, err := provenanceArg(field, "eq", item)
			if err != nil {
				return nil, err
			}
			out[i] = a
		}
		return out, nil
	}
	switch field {
	case "verified":
		if _, ok := v.(bool); !ok {
			return nil, badFilter("filters: verified takes true or false")
		}
		return v, nil
	case "source_class":
		if s, ok := v.(string); !ok || !slices.Contains(sourceClasses, s) {
			return nil, badFilter("filters: source_class takes direct, derived, external or imported")
		}
		return v, nil
	default:
		s, _ := v.(string)
		if name := memrow.EntityName(s); name != "" && name != "*" {
			return name, nil
		}
		return nil, badFilter("filters: entities takes an entity name")
	}
}

// provenanceConds compiles one provenance field's value.
func provenanceConds(field string, v any) (predicate, error) {
	ops, isObj := v.(map[string]any)
	if !isObj {
		ops = map[string]any{"eq": v}
	}
	var all allOf
	for _, op := range sortedKeys(ops) {
		if !slices.Contains(provenanceOps[field], op) {
			return nil, badFilter("filters: %s: operator %q does not apply; it takes a value or %s", field, op, strings.Join(provenanceOps[field][1:], ", "))
		}
		arg, err := provenanceArg(field, op, ops[op])
		if err != nil {
			return nil, err
		}
		all = append(all, cond{field: field, op: op, arg: arg, get: provenanceGetters[field]})
	}
	return all, nil
}

// pushProvenance takes the provenance conditions of a top-level conjunction's field:
// every entity named, and the first source class and verification asked (a second
// only narrows further, which the facade's check does).
func (p *plan) pushProvenance(field string, v any) {
	ops, isObj := v.(map[string]any)
	if !isObj {
		ops = map[string]any{"eq": v}
	}
	for op, arg := range ops {
		switch {
		case field == "entities" && op != "in" && op != "ne":
			if name, ok := arg.(string); ok {
				p.provenance.Entities = append(p.provenance.Entities, memrow.EntityName(name))
			}
		case field == "source_class" && (op == "eq" || op == "in") && p.provenance.SourceClass == nil:
			if s, ok := arg.(string); ok {
				p.provenance.SourceClass = []string{s}
			}
			for _, item := range anyList(arg) {
				if s, ok := item.(string); ok {
					p.provenance.SourceClass = append(p.provenance.SourceClass, s)
				}
			}
		case field == "verified" && op == "eq" && p.provenance.Verified == nil:
			if b, ok := arg.(bool); ok {
				p.provenance.Verified = &b
			}
		}
	}
}

// pushed reports whether Loom's search applied a condition itself.
func (p provenance) pushed(c cond) bool {
	switch c.field {
	case "entities":
		return c.op != "in" && c.op != "ne" && slices.Contains(p.Entities, c.arg.(string))
	case "source_class":
		want := []string{}
		if s, ok := c.arg.(string); ok && c.op == "eq" {
			want = []string{s}
		}
		for _, item := range anyList(c.arg) {
			want = append(want, item.(string))
		}
		return c.op != "ne" && slices.Equal(want, p.SourceClass)
	case "verified":
		return c.op == "eq" && p.Verified != nil && *p.Verified == c.arg
	}
	return false
}

// narrow sets a search request's provenance filters.
func (p provenance) narrow(req *client.SearchRequest) {
	req.Entities, req.SourceClass, req.Verified = p.Entities, p.SourceClass, p.Verified
}
