package heads

import (
	"encoding/json"
	"fmt"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/rowseal"
)

// TextFields are the fields of rowText, as a row's JSON names them: what the at-rest
// pass moves from a row stored before migration 056 into its sealed column.
var TextFields = []string{"value", "tags", "entities", "entity_types", "relations"}

// rowText is the part of a row sealed at rest: the memory's text, and the plain
// SHA-256 of its value (migration 101: the columns hold it keyed).
type rowText struct {
	Value         json.RawMessage   `json:"value"`
	Tags          []string          `json:"tags"`
	Entities      []string          `json:"entities"`
	EntityTypes   map[string]string `json:"entity_types,omitempty"`
	Relations     []events.Relation `json:"relations,omitempty"`
	ContentSHA256 string            `json:"content_sha256,omitempty"`
}

// AtRest is how memory_current and memory_revisions keep a row (the commit writes
// both columns with it): its JSON without the
// text, and the text sealed under a key derived from the revision's data key, as
// loom.opened_row (migration 056) opens it in Postgres: AES-256-CBC with PKCS#7 padding
// and a zero IV (pgcrypto's encrypt(..., 'aes')) under HMAC-SHA256(dataKey, "loom.row").
// The derived key seals this one plaintext only, so the fixed IV is never reused, and
// it is never the key that seals the topic's content (AES-GCM).
func AtRest(row *memrow.Row, dataKey []byte) (payload, sealed []byte, err error) {
	text, err := json.Marshal(rowText{Value: row.Value, Tags: row.Tags, Entities: row.Entities,
		EntityTypes: row.EntityTypes, Relations: row.Relations, ContentSHA256: row.ContentSHA256})
	if err != nil {
		return nil, nil, fmt.Errorf("encode the row's text: %w", err)
	}
	bare := *row
	bare.Value, bare.Tags, bare.Entities, bare.EntityTypes, bare.Relations = nil, nil, nil, nil, nil
	bare.ContentSHA256 = ""
	if payload, err = json.Marshal(&bare); err != nil {
		return nil, nil, fmt.Errorf("encode the row: %w", err)
	}
	if sealed, err = rowseal.Seal(dataKey, rowseal.LabelRow, text); err != nil {
		return nil, nil, fmt.Errorf("seal the row's text: %w", err)
	}
	return payload, sealed, nil
}
