// Package rowseal seals text kept at rest in Postgres the way the database opens it:
// AES-256-CBC with PKCS#7 padding and a zero IV (pgcrypto's decrypt(..., 'aes')) under
// HMAC-SHA256(dataKey, label). Each label derives its own key from a revision's or a
// turn's data key, and that key seals one plaintext only, so the fixed IV is never
// reused; it is never the key that seals the topic's content (AES-GCM, events).
package rowseal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
)

// Labels of the sealed columns; the SQL that opens each names the same label.
const (
	LabelRow    = "loom.row"    // memory rows' and knowledge heads' text (loom.opened_row)
	LabelTurn   = "loom.turn"   // the conversation's turns (loom.memory_evidence)
	LabelDigest = "loom.digest" // session digests (loom.session_summaries)
	LabelChunk  = "loom.chunk"  // verbatim chunks of the conversation (loom.memory_chunks)
	// LabelDecision seals a decision record's decided_by and supersedes (loom.decision_records).
	LabelDecision = "loom.decision"
	// LabelVectors seals a revision's vectors in its outbox row until the relay
	// publishes its record (internal/outbox); never opened in SQL.
	LabelVectors = "loom.vectors"
	// LabelLearning seals rules about the agent and their quotes (loom.learnings_queue,
	// loom.learnings_supporters).
	LabelLearning = "loom.learning"
	// LabelAnswer and LabelRevisions seal a write's stored answer and committed
	// revisions (loom.idempotency), under the key of the request's claim; never
	// opened in SQL.
	LabelAnswer    = "loom.idempotency.answer"
	LabelRevisions = "loom.idempotency.revisions"
	// LabelPage seals a parked search's plan and pool (loom.search_pages); LabelTrace
	// a kept search trace (loom.search_traces). Each row has a key of its own; never
	// opened in SQL.
	LabelPage     = "loom.page"
	LabelPagePool = "loom.page.pool"
	LabelTrace    = "loom.trace"
	// LabelRequestWho seals a deferred extraction request's agent and session
	// (loom.extraction_requests.who, under who_key; opened in SQL by loom.request_who).
	LabelRequestWho = "loom.request.who"
)

// Seal seals plain under the key label derives from dataKey.
func Seal(dataKey []byte, label string, plain []byte) ([]byte, error) {
	return SealOwned(dataKey, label, append(make([]byte, 0, len(plain)+aes.BlockSize), plain...))
}

// SealOwned is Seal encrypting plain where it lies, padded within its capacity when
// it has aes.BlockSize spare (else in a copy): for a caller whose plain is its own and
// not read again (a revision's vectors, 3 KiB a write). The sealed text is returned.
func SealOwned(dataKey []byte, label string, plain []byte) ([]byte, error) {
	mac := hmac.New(sha256.New, dataKey)
	mac.Write([]byte(label))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("seal under %s: %w", label, err)
	}
	pad := aes.BlockSize - len(plain)%aes.BlockSize
	padded := append(plain, bytes.Repeat([]byte{byte(pad)}, pad)...)
	cipher.NewCBCEncrypter(block, make([]byte, aes.BlockSize)).CryptBlocks(padded, padded)
	return padded, nil
}

// Open opens what Seal sealed under dataKey and label, as pgcrypto's decrypt does in
// SQL: for a read that opens many rows in Go rather than once a row in the database.
func Open(dataKey []byte, label string, sealed []byte) ([]byte, error) {
	if len(sealed) == 0 || len(sealed)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("open under %s: %d bytes is no sealed text", label, len(sealed))
	}
	mac := hmac.New(sha256.New, dataKey)
	mac.Write([]byte(label))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("open under %s: %w", label, err)
	}
	out := make([]byte, len(sealed))
	cipher.NewCBCDecrypter(block, make([]byte, aes.BlockSize)).CryptBlocks(out, sealed)
	pad := int(out[len(out)-1])
	if pad == 0 || pad > aes.BlockSize || pad > len(out) || !bytes.Equal(out[len(out)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, fmt.Errorf("open under %s: the key does not open it", label)
	}
	return out[:len(out)-pad], nil
}
