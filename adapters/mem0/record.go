package mem0

import (
	"encoding/json"
	"time"

	"github.com/loomplane/loom/client"
)

// stored is the Loom value of a memory the facade writes: the text as written, the
// message's role, and mem0's metadata, which Loom has no field for.
type stored struct {
	Memory   string         `json:"memory"`
	Role     string         `json:"role,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// readStored reads any Loom value as mem0 sees it: the facade's own object, a plain
// string, or any other JSON value as its text.
func readStored(v json.RawMessage) stored {
	var s stored
	if json.Unmarshal(v, &s) == nil && s.Memory != "" {
		return s
	}
	var text string
	if json.Unmarshal(v, &text) == nil {
		return stored{Memory: text}
	}
	return stored{Memory: string(v)}
}

// record is a memory as mem0's API answers it, with Loom's own fields under `loom`.
type record struct {
	ID             string         `json:"id"`
	Memory         string         `json:"memory"`
	UserID         *string        `json:"user_id"`
	AgentID        *string        `json:"agent_id"`
	AppID          *string        `json:"app_id"`
	RunID          *string        `json:"run_id"`
	Hash           string         `json:"hash"`
	Metadata       map[string]any `json:"metadata"`
	Categories     []string       `json:"categories"`
	Immutable      bool           `json:"immutable"`
	ExpirationDate *string        `json:"expiration_date"`
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
	Score          *float64       `json:"score,omitempty"`
	Loom           loomFields     `json:"loom"`
}

// loomFields are what Loom says of the memory beyond mem0's fields.
type loomFields struct {
	Namespace   string   `json:"namespace"`
	Key         string   `json:"key"`
	VersionText string   `json:"version_text"`
	Status      string   `json:"status"`
	MemoryType  string   `json:"memory_type"`
	Role        string   `json:"role,omitempty"`
	Relevance   *float64 `json:"relevance,omitempty"`
	// What Loom's provenance filters read (provenance.go).
	Entities    []string `json:"entities"`
	SourceClass string   `json:"source_class"`
	Verified    bool     `json:"verified"`
}

// entity is an identity field as mem0 spells it: Loom's default "-" is null.
func entity(v string) *string {
	if v == "" || v == "-" {
		return nil
	}
	return &v
}

func (f *facade) record(m *client.Memory) record {
	s := readStored(m.Value)
	r := record{ID: m.MemoryID, Memory: s.Memory, UserID: entity(m.UserID), AgentID: entity(m.Agent), RunID: entity(m.SessionID),
		Hash: m.ContentSHA256, Metadata: s.Metadata, Categories: m.Tags, Immutable: m.Locked, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
		Loom: loomFields{Namespace: m.Namespace, Key: m.MemoryKey, VersionText: m.VersionText, Status: m.Status, MemoryType: m.MemoryType, Role: s.Role,
			Entities: m.Entities, SourceClass: m.SourceClass, Verified: m.VerifiedBy != ""}}
	if m.Namespace != f.namespace {
		r.AppID = entity(m.Namespace)
	}
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	if r.Categories == nil {
		r.Categories = []string{}
	}
	if r.Loom.Entities == nil {
		r.Loom.Entities = []string{}
	}
	if m.ExpiresAt != nil {
		d := m.ExpiresAt.UTC().Format(time.DateOnly)
		r.ExpirationDate = &d
	}
	return r
}

// entities are a request's mem0 entity ids.
type entities struct {
	UserID  string `json:"user_id"`
	AgentID string `json:"agent_id"`
	AppID   string `json:"app_id"`
	RunID   string `json:"run_id"`
}

func (e entities) identity() client.Identity {
	return client.Identity{Agent: e.AgentID, UserID: e.UserID, SessionID: e.RunID}
}

func (e entities) none() bool { return e == entities{} }

// The fields mem0's clients send that the facade takes and ignores (docs/mem0.md, "Left
// out"), declared so that any other field is refused as unknown, as the REST API
// refuses one.
type (
	clientIgnored struct {
		OrgID        json.RawMessage `json:"org_id"`
		ProjectID    json.RawMessage `json:"project_id"`
		OutputFormat json.RawMessage `json:"output_format"`
		Version      json.RawMessage `json:"version"`
	}
	addIgnored struct {
		clientIgnored
		CustomCategories        json.RawMessage `json:"custom_categories"`
		CustomInstructions      json.RawMessage `json:"custom_instructions"`
		AgentCustomInstructions json.RawMessage `json:"agent_custom_instructions"`
		StructuredDataSchema    json.RawMessage `json:"structured_data_schema"`
		Includes                json.RawMessage `json:"includes"`
		Excludes                json.RawMessage `json:"excludes"`
		AsyncMode               json.RawMessage `json:"async_mode"`
		EnableGraph             json.RawMessage `json:"enable_graph"`
	}
	searchIgnored struct {
		clientIgnored
		Rerank        json.RawMessage `json:"rerank"`
		KeywordSearch json.RawMessage `json:"keyword_search"`
		Fields        json.RawMessage `json:"fields"`
		LatestOnly    json.RawMessage `json:"latest_only"`
		ShowExpired   json.RawMessage `json:"show_expired"`
		ReferenceDate json.RawMessage `json:"reference_date"`
		Source        json.RawMessage `json:"source"`
		EnableGraph   json.RawMessage `json:"enable_graph"`
	}
	listIgnored struct {
		clientIgnored
		LatestOnly  json.RawMessage `json:"latest_only"`
		ShowExpired json.RawMessage `json:"show_expired"`
		EnableGraph json.RawMessage `json:"enable_graph"`
	}
)
