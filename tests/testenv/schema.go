package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// EnvelopeSchema compiles the published JSON Schema of a record value
// (schemas/events/envelope.json), with formats asserted.
func EnvelopeSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	file := filepath.Join(filepath.Dir(here), "..", "..", "schemas", "events", "envelope.json")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	comp.AssertFormat()
	if err := comp.AddResource("envelope.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := comp.Compile("envelope.json")
	if err != nil {
		t.Fatal(err)
	}
	return schema
}

// CheckSchema fails the test unless value is a record value the schema accepts.
func CheckSchema(t testing.TB, schema *jsonschema.Schema, what string, value []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		t.Fatalf("%s is not JSON: %v", what, err)
	}
	if err := schema.Validate(v); err != nil {
		t.Fatalf("%s fails the envelope schema: %v", what, err)
	}
}
