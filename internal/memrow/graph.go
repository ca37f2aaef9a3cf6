package memrow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/loomplane/loom/events"
)

// Limits on what a writer may declare for the graph on one row.
const (
	MaxEntities        = 32
	MaxRelations       = 8
	MaxEntityNameBytes = 256
	MaxEntityTypeBytes = 64
	MaxPredicateBytes  = 128
)

// EntityName is the canonical form of an entity name, the graph's key for it: lower
// case, inner whitespace collapsed to one space. "New  York" and "new york" are one
// entity; each spelling stays as an alias.
func EntityName(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}

// Predicate is the canonical form of a relation's predicate: lower case, words joined
// by '_' ("Lives In" is lives_in), so a namespace declares each predicate once.
func Predicate(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), "_")
}

// entityObject is the object form of a declared entity.
type entityObject struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// ParseEntities reads a request's entities: each a name, or {"name": ..., "type": ...}.
// It returns the names in order, one spelling per canonical name (the first), and
// the declared types by name. Field errors name entities[i].
func ParseEntities(raw []json.RawMessage) (names []string, types map[string]string, err error) {
	const field = "entities"
	if len(raw) > MaxEntities {
		return nil, nil, invalid(field, "has %d entities, more than %d", len(raw), MaxEntities)
	}
	names = []string{}
	seen := map[string]bool{}
	for i, r := range raw {
		f := fmt.Sprintf("%s[%d]", field, i)
		var e entityObject
		if err := json.Unmarshal(r, &e.Name); err != nil {
			dec := json.NewDecoder(bytes.NewReader(r))
			dec.DisallowUnknownFields()
			if dec.Decode(&e) != nil {
				return nil, nil, invalid(f, "must be a name or an object {\"name\": ..., \"type\": ...}")
			}
		}
		if err := checkPlain(f+".name", e.Name, MaxEntityNameBytes); err != nil {
			return nil, nil, err
		}
		if EntityName(e.Name) == "" {
			return nil, nil, invalid(f+".name", "must not be only whitespace")
		}
		if e.Type != "" {
			if err := checkPlain(f+".type", e.Type, MaxEntityTypeBytes); err != nil {
				return nil, nil, err
			}
		}
		canon := EntityName(e.Name)
		if seen[canon] {
			continue
		}
		seen[canon] = true
		names = append(names, e.Name)
		if e.Type != "" {
			if types == nil {
				types = map[string]string{}
			}
			types[e.Name] = e.Type
		}
	}
	return names, types, nil
}

// RelationInput is a relation as a request names it; the cardinality is the
// namespace's, never the writer's.
type RelationInput struct {
	Subject   string     `json:"subject"`
	Predicate string     `json:"predicate"`
	Object    string     `json:"object"`
	ValidFrom *time.Time `json:"valid_from"`
	ValidTo   *time.Time `json:"valid_to"`
}

// ValidateRelations checks a request's relations: at most MaxRelations, each with a
// subject, predicate and object, an interval that ends after it starts, and no fact
// named twice. Field errors name relations[i].
func ValidateRelations(rels []RelationInput) error {
	const field = "relations"
	if len(rels) > MaxRelations {
		return invalid(field, "has %d relations, more than %d", len(rels), MaxRelations)
	}
	seen := map[[3]string]bool{}
	for i, r := range rels {
		f := fmt.Sprintf("%s[%d]", field, i)
		for _, part := range []struct {
			name, v string
			max     int
		}{{"subject", r.Subject, MaxEntityNameBytes}, {"predicate", r.Predicate, MaxPredicateBytes}, {"object", r.Object, MaxEntityNameBytes}} {
			if err := checkPlain(f+"."+part.name, part.v, part.max); err != nil {
				return err
			}
			if strings.TrimSpace(part.v) == "" {
				return invalid(f+"."+part.name, "must not be only whitespace")
			}
		}
		if r.ValidFrom != nil && r.ValidTo != nil && !r.ValidTo.Truncate(time.Second).After(r.ValidFrom.Truncate(time.Second)) {
			return invalid(f+".valid_to", "must be at least a second after valid_from")
		}
		k := [3]string{EntityName(r.Subject), Predicate(r.Predicate), EntityName(r.Object)}
		if seen[k] {
			return invalid(f, "names the same subject, predicate and object as an earlier relation")
		}
		seen[k] = true
	}
	return nil
}

// Relations turns validated request relations into the row's, with the predicate in
// its canonical form and the cardinality cardinality(predicate) gives.
func Relations(rels []RelationInput, cardinality func(predicate string) string) []events.Relation {
	out := make([]events.Relation, len(rels))
	for i, r := range rels {
		p := Predicate(r.Predicate)
		out[i] = events.Relation{Subject: r.Subject, Predicate: p, Object: r.Object,
			ValidFrom: utcSeconds(r.ValidFrom), ValidTo: utcSeconds(r.ValidTo), Cardinality: cardinality(p)}
	}
	return out
}

// utcSeconds keeps a stated time at the precision the graph stores it.
func utcSeconds(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Second)
	return &u
}
