package schemas_test

import (
	"context"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// The spec is a document every OpenAPI tool must read: generators, validators and
// viewers refuse one that is not YAML, or whose schemas, examples and references do
// not hold. kin-openapi's loader parses it and resolves every $ref; Validate checks it
// against OpenAPI 3.1 (schemas as JSON Schema 2020-12, examples against their schemas).
func TestSpecIsAValidOpenAPIDocument(t *testing.T) {
	doc := LoadSpec(t)
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", specFile, err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("%s declares openapi %q, want 3.1.x", specFile, doc.OpenAPI)
	}
}

// LoadSpec parses the spec and resolves its references.
func LoadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(specFile)
	if err != nil {
		t.Fatalf("load %s: %v", specFile, err)
	}
	return doc
}
