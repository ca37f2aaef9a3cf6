package events

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

// searchableContent is Content with its key embedding checked, not kept: the outer
// field takes the key's JSON name from the embedded one (the shallower field wins, in
// encoding/json and in segmentio's), so Content.KeyEmbedding stays nil.
type searchableContent struct {
	Content
	KeyEmbedding checkedVector `json:"key_embedding,omitempty"`
}

func (c *searchableContent) content() *Content { return &c.Content }

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
