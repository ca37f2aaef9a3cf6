package mcp

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemaSet infers each type's JSON Schema once.
type schemaSet struct {
	mu   sync.Mutex
	byGo map[reflect.Type]*jsonschema.Schema
}

func newSchemaSet() *schemaSet { return &schemaSet{byGo: map[reflect.Type]*jsonschema.Schema{}} }

// of is t's schema: a json.RawMessage (a memory's value) is any JSON value, and a map
// may be null (the server sends `"generations": null` for a barrier that read none).
func (s *schemaSet) of(t reflect.Type) *jsonschema.Schema {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc, ok := s.byGo[t]; ok {
		return sc
	}
	sc, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		// Not the empty schema: it marshals as `true`, which clients read as no object schema.
		reflect.TypeFor[json.RawMessage](): {Description: "Any JSON value, as canonical JSON."},
	}})
	if err != nil {
		panic(fmt.Sprintf("mcp: the schema of %v: %v", t, err)) // a type of this package: a bug
	}
	nullableMaps(sc)
	s.byGo[t] = sc
	return sc
}

func nullableMaps(sc *jsonschema.Schema) {
	if sc == nil {
		return
	}
	if sc.Type == "object" && sc.Properties == nil && sc.AdditionalProperties != nil {
		sc.Types, sc.Type = []string{"null", "object"}, ""
	}
	for _, p := range sc.Properties {
		nullableMaps(p)
	}
	nullableMaps(sc.Items)
	nullableMaps(sc.AdditionalProperties)
}
