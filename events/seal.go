package events

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrSealBroken is wrapped by every Open failure: wrong key, wrong record, tampering,
// or an unknown algorithm all look the same to a consumer, which cannot read the content.
var ErrSealBroken = errors.New("events: sealed content cannot be opened")

const (
	dataKeySize = 32 // AES-256
	nonceSize   = 12 // the GCM standard nonce
	tagSize     = 16 // the GCM tag appended to the ciphertext
)

// Content is what a revision seals: everything that is memory text, and from envelope
// version 2 on what identifies its user and its text.
type Content struct {
	MemoryKey string          `json:"memory_key"`
	Value     json.RawMessage `json:"value"`
	Tags      []string        `json:"tags"`
	Entities  []string        `json:"entities,omitempty"`
	Embedding Vector          `json:"embedding,omitempty"`
	// KeyEmbedding is the vector of the key's words, when the key carries words.
	KeyEmbedding Vector `json:"key_embedding,omitempty"`
	// ChunkEmbeddings are the vectors of a long value's windows, in order.
	ChunkEmbeddings []Vector `json:"chunk_embeddings,omitempty"`

	// Added within v1 (additive): what the writer declared for the graph.
	// EntityTypes maps a name of Entities to the type its writer declared.
	EntityTypes map[string]string `json:"entity_types,omitempty"`
	// Relations are the facts the writer named, at most eight.
	Relations []Relation `json:"relations,omitempty"`

	// Added in version 2: the revision's user id and the SHA-256 of its value (64
	// lowercase hex), sealed so that destroying the data key leaves neither readable.
	UserID        string `json:"user_id,omitempty"`
	ContentSHA256 string `json:"content_sha256,omitempty"`
	// SubjectSalt is the salt of Revision.SubjectCommitment: the audit row keeps it
	// beside the fields it commits, and an erasure scrubs it with them.
	SubjectSalt string `json:"subject_salt,omitempty"`

	// Added in version 3: the revision's agent and session id, sealed so that
	// destroying the data key leaves neither readable (Revision.AgentRef and
	// SessionRef name them in the clear).
	Agent     string `json:"agent,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// Sealed is Content encrypted under a per-revision data key.
type Sealed struct {
	Alg        string `json:"alg"`        // SealAlg
	Nonce      []byte `json:"nonce"`      // 12 bytes, base64 in JSON
	Ciphertext []byte `json:"ciphertext"` // GCM output incl. tag, base64 in JSON
}

// NewDataKey returns a fresh random AES-256 data key for one revision.
func NewDataKey() ([]byte, error) {
	key := make([]byte, dataKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("events: data key: %w", err)
	}
	return key, nil
}

// Seal encrypts the JSON of c under dataKey with AES-256-GCM, a fresh random nonce, and
// the record id as additional data, so a sealed blob cannot be moved to another record.
func Seal(dataKey []byte, recordID string, c *Content) (*Sealed, error) {
	if c == nil {
		return nil, errors.New("events: seal: nil content")
	}
	plaintext, err := contentJSON(c)
	if err != nil {
		return nil, fmt.Errorf("events: seal: %w", err)
	}
	// The plaintext is Seal's own: it is encrypted in its buffer, sized for the tag.
	return sealInto(plaintext[:0], dataKey, recordID, plaintext)
}

// sealBytes encrypts plaintext under dataKey with a fresh random nonce and aad as
// additional data.
func sealBytes(dataKey []byte, aad string, plaintext []byte) (*Sealed, error) {
	return sealInto(nil, dataKey, aad, plaintext)
}

// sealInto is sealBytes appending the ciphertext to dst: plaintext[:0] encrypts in
// place, for a plaintext the caller owns.
func sealInto(dst, dataKey []byte, aad string, plaintext []byte) (*Sealed, error) {
	aead, err := newAEAD(dataKey)
	if err != nil {
		return nil, fmt.Errorf("events: seal: %w", err)
	}
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("events: seal: nonce: %w", err)
	}
	return &Sealed{Alg: SealAlg, Nonce: nonce, Ciphertext: aead.Seal(dst, nonce, plaintext, []byte(aad))}, nil
}

// Open decrypts s, sealed for recordID under dataKey. Every failure wraps ErrSealBroken.
func Open(dataKey []byte, recordID string, s *Sealed) (*Content, error) {
	return openContent(dataKey, recordID, s, false)
}

// OpenInPlace is Open decrypting into s's own ciphertext, which it spends: s opens
// once (a second Open of it fails), and after a failure its ciphertext is zeroed. For
// a follower of the topic that decodes its records afresh for every attempt: a replay
// opens millions, and each plaintext allocated beside its ciphertext was a few
// kilobytes allocated, cleared and collected per record.
func OpenInPlace(dataKey []byte, recordID string, s *Sealed) (*Content, error) {
	return openContent(dataKey, recordID, s, true)
}

func openContent(dataKey []byte, recordID string, s *Sealed, inPlace bool) (*Content, error) {
	plaintext, err := openInto(dataKey, recordID, s, inPlace)
	if err != nil {
		return nil, err
	}
	c, err := unmarshal[Content](plaintext)
	if err != nil {
		return nil, errContent(err)
	}
	return c, nil
}

// errContent is the error of opened content that does not decode.
func errContent(err error) error {
	return fmt.Errorf("%w: content: %v", ErrSealBroken, err)
}

// openBytes decrypts s, sealed with aad under dataKey. Every failure wraps ErrSealBroken.
func openBytes(dataKey []byte, aad string, s *Sealed) ([]byte, error) {
	return openInto(dataKey, aad, s, false)
}

// openInto is openBytes, decrypting over s's ciphertext when inPlace.
func openInto(dataKey []byte, aad string, s *Sealed, inPlace bool) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil sealed", ErrSealBroken)
	}
	if s.Alg != SealAlg {
		return nil, fmt.Errorf("%w: alg %q, want %q", ErrSealBroken, s.Alg, SealAlg)
	}
	if len(s.Nonce) != nonceSize {
		// cipher.AEAD.Open panics on a wrong nonce length, so check before calling it.
		return nil, fmt.Errorf("%w: nonce is %d bytes, want %d", ErrSealBroken, len(s.Nonce), nonceSize)
	}
	aead, err := newAEAD(dataKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSealBroken, err)
	}
	var dst []byte
	if inPlace {
		dst = s.Ciphertext[:0]
	}
	plaintext, err := aead.Open(dst, s.Nonce, s.Ciphertext, []byte(aad))
	if err != nil {
		return nil, fmt.Errorf("%w: wrong key, wrong record or tampered data", ErrSealBroken)
	}
	return plaintext, nil
}

func newAEAD(dataKey []byte) (cipher.AEAD, error) {
	// aes.NewCipher also accepts 16- and 24-byte keys; SealAlg promises AES-256.
	if len(dataKey) != dataKeySize {
		return nil, fmt.Errorf("data key is %d bytes, want %d", len(dataKey), dataKeySize)
	}
	block, err := aes.NewCipher(dataKey)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
