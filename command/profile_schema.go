package command

import (
	"context"
	"encoding/json"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/profiles"
)

// profile_schema.set (memory-architecture, "Background passes", structured_profile):
// a namespace's JSON Schema for its users' structured profiles. The structured_profile
// pass builds a profile for each user of a namespace that has one, held to it. The
// schema goes to the model as a strict structured output, so it must be in the subset
// strict mode takes (every object lists all its properties as required and allows no
// others; a field that may be unknown is nullable), which is checked here rather than
// by the provider's 400 on the first build.

// ProfileSchemaRequest is profile_schema.set's body.
type ProfileSchemaRequest struct {
	Schema json.RawMessage `json:"schema"`
}

// ProfileSchemaAnswer is profile_schema.set's answer.
type ProfileSchemaAnswer struct {
	Namespace  string    `json:"namespace"`
	SchemaHash string    `json:"schema_hash"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// setProfileSchema checks and stores a namespace's profile schema.
func (s *Service) setProfileSchema(ctx context.Context, p auth.Principal, ns string, req ProfileSchemaRequest) (*ProfileSchemaAnswer, error) {
	canonical, err := checkProfileSchema(req.Schema)
	if err != nil {
		return nil, err
	}
	hash := profiles.HashOf(canonical)
	at, err := profiles.WriteSchema(ctx, s.pool, p.Org, ns, canonical, hash, p.Actor())
	if err != nil {
		return nil, httperr.Store("storing the profile schema", err)
	}
	return &ProfileSchemaAnswer{Namespace: ns, SchemaHash: hash, UpdatedAt: at}, nil
}

// checkProfileSchema is the rule of a profile schema: a JSON object of at most
// profiles.MaxSchemaBytes describing an object, that compiles as a JSON Schema
// (santhosh-tekuri/jsonschema, through internal/llm) and is in strict mode's subset.
func checkProfileSchema(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, httperr.Validation("schema", "schema is required: the JSON Schema of the namespace's profiles")
	}
	if len(raw) > profiles.MaxSchemaBytes {
		return nil, httperr.Validation("schema", "the schema is larger than 32 KiB")
	}
	canonical, err := memrow.Canonical("schema", raw)
	if err != nil {
		return nil, httperr.Validation("schema", err.Error())
	}
	var doc map[string]any
	if err := json.Unmarshal(canonical, &doc); err != nil {
		return nil, httperr.Validation("schema", "the schema must be a JSON object")
	}
	if doc["type"] != "object" {
		return nil, httperr.Validation("schema", `a profile schema describes an object: its "type" must be "object"`)
	}
	if _, err := llm.NewSchema("structured_profile", "", doc); err != nil {
		return nil, httperr.Validation("schema", err.Error())
	}
	return canonical, nil
}
