package heads

import (
	"bytes"
	"encoding/json"
	"fmt"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/rowseal"
)

// TextFields are the fields of rowText, as a row's JSON names them: what the at-rest
// pass moves from a row stored before migration 056 into its sealed column.
var TextFields = []string{"value", "tags", "entities", "entity_types", "relations"}

// rowText is the part of a row sealed at rest: the memory's text, the plain SHA-256
// of its value (migration 101: the columns hold it keyed), its user id (migration
// 155: the column holds the user's reference), its key (migration 171: the column
// holds the key's reference, loom.key_ref), and its agent and session (migration 173:
// the columns hold loom.agent_ref's and loom.session_ref's).
type rowText struct {
	UserID        string             `json:"user_id,omitempty"`
	MemoryKey     string             `json:"memory_key,omitempty"`
	Agent         string             `json:"agent,omitempty"`
	SessionID     string             `json:"session_id,omitempty"`
	Shared        *memrow.Provenance `json:"shared,omitempty"` // a promoted row's source, which names its user
	Value         json.RawMessage    `json:"value"`
	Tags          []string           `json:"tags"`
	Entities      []string           `json:"entities"`
	EntityTypes   map[string]string  `json:"entity_types,omitempty"`
	Relations     []events.Relation  `json:"relations,omitempty"`
	ContentSHA256 string             `json:"content_sha256,omitempty"`
}

// AtRest is how memory_current and memory_revisions keep a row (the commit writes
// both columns with it): its JSON without the
// text, and the text sealed under a key derived from the revision's data key, as
// loom.opened_row (migration 056) opens it in Postgres: AES-256-CBC with PKCS#7 padding
// and a zero IV (pgcrypto's encrypt(..., 'aes')) under HMAC-SHA256(dataKey, "loom.row").
// The derived key seals this one plaintext only, so the fixed IV is never reused, and
// it is never the key that seals the topic's content (AES-GCM).
func AtRest(row *memrow.Row, dataKey []byte) (payload, sealed []byte, err error) {
	// Without HTML escaping, as the topic's records encode it: the relay seals a
	// record's content from this text (internal/outbox), and the value's bytes must be
	// the ones the commit would have sealed.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rowText{UserID: row.UserID, MemoryKey: row.MemoryKey, Agent: row.Agent, SessionID: row.SessionID, Shared: row.Shared, Value: row.Value, Tags: row.Tags, Entities: row.Entities,
		EntityTypes: row.EntityTypes, Relations: row.Relations, ContentSHA256: row.ContentSHA256}); err != nil {
		return nil, nil, fmt.Errorf("encode the row's text: %w", err)
	}
	text := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	bare := *row
	bare.Value, bare.Tags, bare.Entities, bare.EntityTypes, bare.Relations = nil, nil, nil, nil, nil
	bare.ContentSHA256, bare.Shared, bare.MemoryKey = "", nil, ""
	// "-" (none given) names no one and is stored as it is, in the columns too.
	if bare.UserID != memrow.DefaultIdentity {
		bare.UserID = ""
	}
	if bare.Agent != memrow.DefaultIdentity {
		bare.Agent = ""
	}
	if bare.SessionID != memrow.DefaultIdentity {
		bare.SessionID = ""
	}
	if payload, err = json.Marshal(&bare); err != nil {
		return nil, nil, fmt.Errorf("encode the row: %w", err)
	}
	if sealed, err = rowseal.Seal(dataKey, rowseal.LabelRow, text); err != nil {
		return nil, nil, fmt.Errorf("seal the row's text: %w", err)
	}
	return payload, sealed, nil
}

// Redacted is what a redacted row keeps sealed (migration 175): its key, user, agent
// and session, which its columns name by reference and its JSON no longer holds, with
// the text the redaction left (no value, tags or entities), sealed as AtRest seals a
// row's text under dataKey, a key of the redaction's own.
func Redacted(id memrow.Identity, dataKey []byte) ([]byte, error) {
	text, err := json.Marshal(rowText{UserID: id.UserID, MemoryKey: id.MemoryKey, Agent: id.Agent, SessionID: id.SessionID,
		Value: json.RawMessage("null"), Tags: []string{}, Entities: []string{}})
	if err != nil {
		return nil, fmt.Errorf("encode the redacted row's text: %w", err)
	}
	sealed, err := rowseal.Seal(dataKey, rowseal.LabelRow, text)
	if err != nil {
		return nil, fmt.Errorf("seal the redacted row's text: %w", err)
	}
	return sealed, nil
}

// OpenText fills row's text from the sealed column AtRest wrote, opened in Go under
// dataKey as loom.opened_row opens it in SQL: for a reader that holds the key already
// (the relay, a search's page) rather than one row's key unwrapped in the database.
// As jsonb's ||: a field the text holds replaces the row's; the text leaves out the
// empty ones (omitempty), so those keep the row's.
func OpenText(dataKey, sealed []byte, row *memrow.Row) error {
	plain, err := rowseal.Open(dataKey, rowseal.LabelRow, sealed)
	if err != nil {
		return err
	}
	var t rowText
	// Decoded as Decode decodes the head's JSON (segmentio/encoding/json: the same
	// values, a raw value's bytes copied as they are), several times faster than
	// encoding/json, which was a fifth of opening a search page's heads in Go.
	if err := fastjson.Unmarshal(plain, &t); err != nil {
		return fmt.Errorf("decode the row's text: %w", err)
	}
	row.Value, row.Tags, row.Entities = t.Value, t.Tags, t.Entities
	if t.UserID != "" { // a row sealed before migration 155 keeps its user in its JSON
		row.UserID = t.UserID
	}
	if t.MemoryKey != "" { // a row sealed before migration 171 keeps its key in its JSON
		row.MemoryKey = t.MemoryKey
	}
	if t.Agent != "" { // a row sealed before migration 173 keeps its agent and session in its JSON
		row.Agent = t.Agent
	}
	if t.SessionID != "" {
		row.SessionID = t.SessionID
	}
	if t.Shared != nil {
		row.Shared = t.Shared
	}
	if t.EntityTypes != nil {
		row.EntityTypes = t.EntityTypes
	}
	if t.Relations != nil {
		row.Relations = t.Relations
	}
	if t.ContentSHA256 != "" {
		row.ContentSHA256 = t.ContentSHA256
	}
	return nil
}
