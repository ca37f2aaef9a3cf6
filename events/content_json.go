package events

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"

	"github.com/segmentio/asm/base64"
)

// contentJSON is the JSON of c as Seal seals it: encoding/json's for every field but
// the vectors, which are appended after the others as Vector.MarshalJSON writes them.
// Through encoding/json each vector's base64 (2 KiB at 384 dimensions) was checked and
// copied again by its compaction of a Marshaler's output, about half of a revision's
// sealing (the relay seals every record it publishes). A JSON object's fields are
// unordered: decoding reads the same Content.
func contentJSON(c *Content) ([]byte, error) {
	bare := *c
	bare.Embedding, bare.KeyEmbedding, bare.ChunkEmbeddings = nil, nil, nil
	var buf bytes.Buffer
	buf.Grow(contentSizeHint(c))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&bare); err != nil {
		return nil, err
	}
	// Encode ends the object with "}\n"; memory_key, value and tags are never omitted,
	// so the object has fields and the vectors follow a comma.
	out := bytes.TrimSuffix(buf.Bytes(), []byte("}\n"))
	if len(c.Embedding) > 0 {
		out = appendVector(append(out, `,"embedding":`...), c.Embedding)
	}
	if len(c.KeyEmbedding) > 0 {
		out = appendVector(append(out, `,"key_embedding":`...), c.KeyEmbedding)
	}
	if len(c.ChunkEmbeddings) > 0 {
		out = append(out, `,"chunk_embeddings":[`...)
		for i, v := range c.ChunkEmbeddings {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendVector(out, v)
		}
		out = append(out, ']')
	}
	return append(out, '}'), nil
}

// appendVector appends v's JSON (Vector.MarshalJSON): the quoted standard base64 of
// its little-endian float32s; null when v is empty. base64 needs no JSON escapes.
func appendVector(dst []byte, v Vector) []byte {
	if len(v) == 0 {
		return append(dst, "null"...)
	}
	raw := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	return appendBase64(dst, raw)
}

// contentSizeHint is about the size of c's JSON, so its buffer grows once.
func contentSizeHint(c *Content) int {
	n := 512 + len(c.Value) + len(c.MemoryKey) + len(c.UserID) + len(c.Agent) + len(c.SessionID)
	for _, t := range c.Tags {
		n += len(t) + 3
	}
	for _, e := range c.Entities {
		n += len(e) + 3
	}
	vec := func(v Vector) int { return (4*len(v)+2)/3*4 + 24 }
	n += vec(c.Embedding) + vec(c.KeyEmbedding)
	for _, v := range c.ChunkEmbeddings {
		n += vec(v)
	}
	// The sealing appends the GCM tag in place.
	return n + tagSize
}

// AppendSealedJSON appends s's JSON to dst, the bytes json.Marshal gives for it, with
// no second copy of its ciphertext's base64: the relay writes a record's sealed content
// into its envelope this way (internal/outbox).
func AppendSealedJSON(dst []byte, s *Sealed) []byte {
	alg, _ := json.Marshal(s.Alg) // a string marshals
	dst = slices.Grow(dst, SealedJSONLen(s))
	dst = append(append(append(dst, `{"alg":`...), alg...), `,"nonce":`...)
	dst = appendBase64(dst, s.Nonce)
	dst = append(dst, `,"ciphertext":`...)
	return append(appendBase64(dst, s.Ciphertext), '}')
}

// SealedJSONLen is the length of s's JSON (AppendSealedJSON) when its algorithm's name
// needs no escaping and its nonce and ciphertext are set: a buffer's size.
func SealedJSONLen(s *Sealed) int {
	return len(`{"alg":"","nonce":"","ciphertext":""}`) + len(s.Alg) +
		base64.StdEncoding.EncodedLen(len(s.Nonce)) + base64.StdEncoding.EncodedLen(len(s.Ciphertext))
}

// appendBase64 appends b as encoding/json writes a []byte: a quoted standard base64,
// null for a nil slice.
func appendBase64(dst, b []byte) []byte {
	if b == nil {
		return append(dst, "null"...)
	}
	n := base64.StdEncoding.EncodedLen(len(b))
	at := len(dst)
	dst = append(dst, make([]byte, n+2)...)
	dst[at], dst[at+n+1] = '"', '"'
	base64.StdEncoding.Encode(dst[at+1:at+1+n], b)
	return dst
}
