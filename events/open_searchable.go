package events

import "encoding/json"

// OpenSearchableInPlace is OpenInPlace for a search index, which reads no key
// embedding: the content's KeyEmbedding is checked as Open checks it (content Open
// refuses is refused) but left nil, so a replay neither allocates nor converts a
// second vector a record. Every other field is as Open gives it.
func OpenSearchableInPlace(dataKey []byte, recordID string, s *Sealed) (*Content, error) {
	plaintext, err := openInto(dataKey, recordID, s, true)
	if err != nil {
		return nil, err
	}
	c, err := unmarshal[searchableContent](plaintext)
	if err != nil {
		return nil, errContent(err)
	}
	return c.content(), nil
}

// searchableContent is Content with its key embedding checked, not kept. Its fields
// are Content's, tag for tag (TestSearchableContentMirrorsContent keeps them so).
type searchableContent struct {
	MemoryKey       string            `json:"memory_key"`
	Value           json.RawMessage   `json:"value"`
	Tags            []string          `json:"tags"`
	Entities        []string          `json:"entities,omitempty"`
	Embedding       Vector            `json:"embedding,omitempty"`
	KeyEmbedding    checkedVector     `json:"key_embedding,omitempty"`
	ChunkEmbeddings []Vector          `json:"chunk_embeddings,omitempty"`
	EntityTypes     map[string]string `json:"entity_types,omitempty"`
	Relations       []Relation        `json:"relations,omitempty"`
	UserID          string            `json:"user_id,omitempty"`
	ContentSHA256   string            `json:"content_sha256,omitempty"`
	SubjectSalt     string            `json:"subject_salt,omitempty"`
	Agent           string            `json:"agent,omitempty"`
	SessionID       string            `json:"session_id,omitempty"`
}

func (c *searchableContent) content() *Content {
	return &Content{MemoryKey: c.MemoryKey, Value: c.Value, Tags: c.Tags, Entities: c.Entities, Embedding: c.Embedding,
		ChunkEmbeddings: c.ChunkEmbeddings, EntityTypes: c.EntityTypes, Relations: c.Relations, UserID: c.UserID,
		ContentSHA256: c.ContentSHA256, SubjectSalt: c.SubjectSalt, Agent: c.Agent, SessionID: c.SessionID}
}

// checkedVector is a Vector's JSON checked as Vector.UnmarshalJSON checks it, and
// dropped.
type checkedVector struct{}

// UnmarshalJSON accepts what Vector.UnmarshalJSON accepts, with its error.
func (checkedVector) UnmarshalJSON(b []byte) error {
	if src, ok := plainBase64(b); ok {
		if size, ok := plainVectorSize(src); ok && eachVectorChunk(src, size, func([]byte) {}) {
			return nil
		}
	}
	var v Vector
	return v.UnmarshalJSON(b)
}
