package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is the shape of a structured answer: sent as response_format json_schema
// with strict set, and checked again on the answer, since a compatible server (a
// local Ollama, say) may not enforce it.
type Schema struct {
	name, description string
	doc               map[string]any
	compiled          *jsonschema.Schema
}

var schemaName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NewSchema compiles doc, a JSON Schema object in the subset strict structured output
// accepts: every object lists all its properties as required and allows no others.
func NewSchema(name, description string, doc map[string]any) (*Schema, error) {
	if !schemaName.MatchString(name) {
		return nil, fmt.Errorf("llm: schema name %q must be 1 to 64 of a-z, A-Z, 0-9, _ and -", name)
	}
	if err := CheckStrict(doc); err != nil {
		return nil, fmt.Errorf("llm: schema %s: %w", name, err)
	}
	compiled, err := Compile(doc)
	if err != nil {
		return nil, fmt.Errorf("llm: schema %s: %w", name, err)
	}
	return &Schema{name: name, description: description, doc: doc, compiled: compiled}, nil
}

// MustSchema is NewSchema for a schema fixed in the code: one that does not compile
// is a bug, found when the package loads.
func MustSchema(name, description string, doc map[string]any) *Schema {
	s, err := NewSchema(name, description, doc)
	if err != nil {
		panic(err)
	}
	return s
}

// Name is the schema's name as sent.
func (s *Schema) Name() string { return s.name }

// Validate checks that content is JSON text matching the schema.
func (s *Schema) Validate(content string) error { return Validate(s.compiled, content) }

// Compile compiles a JSON Schema document.
func Compile(doc map[string]any) (*jsonschema.Schema, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", parsed); err != nil {
		return nil, err
	}
	return c.Compile("schema.json")
}

// Validate checks that content is one JSON value matching compiled.
func Validate(compiled *jsonschema.Schema, content string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return compiled.Validate(v)
}

// CheckStrict reports where doc leaves strict mode's subset: an object that does not
// require every property it lists, or that allows properties it does not list. The
// OpenAI API refuses such a schema with a 400 when strict is set.
func CheckStrict(doc map[string]any) error { return checkStrict(doc, "#") }

func checkStrict(node map[string]any, at string) error {
	if props, ok := node["properties"].(map[string]any); ok || node["type"] == "object" {
		if node["additionalProperties"] != false {
			return fmt.Errorf("%s: an object must set additionalProperties to false", at)
		}
		required := map[string]bool{}
		if list, ok := node["required"].([]any); ok {
			for _, r := range list {
				if s, ok := r.(string); ok {
					required[s] = true
				}
			}
		}
		if list, ok := node["required"].([]string); ok {
			for _, r := range list {
				required[r] = true
			}
		}
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if !required[name] {
				return fmt.Errorf("%s: property %q must be required (make it nullable instead of optional)", at, name)
			}
			if err := checkChild(props[name], at+"/properties/"+name); err != nil {
				return err
			}
		}
	}
	if err := checkChild(node["items"], at+"/items"); err != nil {
		return err
	}
	for _, key := range []string{"anyOf", "$defs", "definitions"} {
		switch sub := node[key].(type) {
		case []any:
			for i, s := range sub {
				if err := checkChild(s, fmt.Sprintf("%s/%s/%d", at, key, i)); err != nil {
					return err
				}
			}
		case map[string]any:
			for name, s := range sub {
				if err := checkChild(s, at+"/"+key+"/"+name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkChild(v any, at string) error {
	if m, ok := v.(map[string]any); ok {
		return checkStrict(m, at)
	}
	return nil
}
