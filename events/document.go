package events

import (
	"errors"
	"fmt"
	"time"
)

// Knowledge document records share the topic with memory revisions: a document
// revision draws its seq from its namespace's generation, so a memory follower takes
// the seq (a placeholder to it) and a knowledge follower applies the document.
const (
	TypeDocumentWritten  Type = "knowledge.document.written"  // a source's first version, or a new version over a live one
	TypeDocumentDeleted  Type = "knowledge.document.deleted"  // the source was deleted: its chunks leave search
	TypeDocumentRestored Type = "knowledge.document.restored" // a deleted source came back with the content it had
)

// IsDocument reports whether records of type t carry a knowledge document revision.
func (t Type) IsDocument() bool {
	switch t {
	case TypeDocumentWritten, TypeDocumentDeleted, TypeDocumentRestored:
		return true
	}
	return false
}

// Document holds the plain fields of a committed knowledge document revision. The
// source URI, title, tags, text and chunks are sealed (DocumentContent).
type Document struct {
	Op          string `json:"op"` // e.g. "knowledge.upsert"
	DocID       string `json:"doc_id"`
	Version     int64  `json:"version"`      // wall-clock ns, strictly above PrevVersion
	PrevVersion int64  `json:"prev_version"` // 0 for a source's first version
	Format      string `json:"format"`
	Deleted     bool   `json:"deleted"`
	ChunkCount  int    `json:"chunk_count"`
	Actor       string `json:"actor"`
	// UserRef names the user the document was written for (UserRef of the id, as a
	// memory revision names its user); absent on a document of the namespace's, which
	// no user owns. Added within version 2 (additive). A user's erasure removes the
	// documents naming the user's reference.
	UserRef   string    `json:"user_ref,omitempty"`
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// EmbeddingModel names the model of the chunks' vectors ("" when none).
	EmbeddingModel string `json:"embedding_model,omitempty"`
	EmbeddingDim   int    `json:"embedding_dim"`
}

// DocumentContent is what a document revision seals: everything that is the
// document's text or names it.
type DocumentContent struct {
	SourceURI string `json:"source_uri"`
	// UserID is the user the document was written for ("" for the namespace's), in the
	// clear: Document.UserRef stands for it in the plain fields.
	UserID      string            `json:"user_id,omitempty"`
	Title       string            `json:"title"`
	ContentType string            `json:"content_type,omitempty"`
	Tags        []string          `json:"tags"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Chunks      []DocumentChunk   `json:"chunks,omitempty"` // empty on a delete
}

// DocumentChunk is one searchable piece of a document, with its vector.
type DocumentChunk struct {
	Ordinal     int      `json:"ordinal"`
	HeadingPath []string `json:"heading_path,omitempty"`
	Kind        string   `json:"kind"`
	Text        string   `json:"text"`
	Embedding   Vector   `json:"embedding,omitempty"`
}

// SealDocument encrypts c under dataKey as Seal does a memory revision's content.
func SealDocument(dataKey []byte, recordID string, c *DocumentContent) (*Sealed, error) {
	if c == nil {
		return nil, errors.New("events: seal: nil document content")
	}
	plaintext, err := marshalJSON(c)
	if err != nil {
		return nil, fmt.Errorf("events: seal: %w", err)
	}
	return sealBytes(dataKey, recordID, plaintext)
}

// OpenDocument decrypts a document revision's content. Every failure wraps ErrSealBroken.
func OpenDocument(dataKey []byte, recordID string, s *Sealed) (*DocumentContent, error) {
	plaintext, err := openBytes(dataKey, recordID, s)
	if err != nil {
		return nil, err
	}
	c, err := unmarshal[DocumentContent](plaintext)
	if err != nil {
		return nil, fmt.Errorf("%w: document content: %v", ErrSealBroken, err)
	}
	return c, nil
}

func validateDocument(d *Document) error {
	switch {
	case d.Op == "":
		return errors.New("op is empty")
	case d.DocID == "":
		return errors.New("doc_id is empty")
	case d.PrevVersion < 0:
		return fmt.Errorf("prev_version %d is negative", d.PrevVersion)
	case d.Version <= d.PrevVersion:
		return fmt.Errorf("version %d is not above prev_version %d", d.Version, d.PrevVersion)
	case d.ChunkCount < 0 || d.EmbeddingDim < 0 || d.Bytes < 0:
		return errors.New("chunk_count, embedding_dim and bytes must not be negative")
	case d.UserRef != "" && !isSHA256Hex(d.UserRef):
		return fmt.Errorf("user_ref %q is not 64 lowercase hex digits", d.UserRef)
	}
	return nil
}
