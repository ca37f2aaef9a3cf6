package events

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	// A replay decodes millions of vectors; the AVX2 decoder is about 7x the standard
	// library's on a 384-dim vector's 2 KiB.
	"github.com/segmentio/asm/base64"
)

// Vector is an embedding. It marshals as the standard base64 of its little-endian
// IEEE-754 float32s, about a third the size of a JSON number array and exact.
type Vector []float32

// MarshalJSON encodes v as a base64 string, or null when v is empty.
func (v Vector) MarshalJSON() ([]byte, error) {
	if len(v) == 0 {
		return []byte("null"), nil
	}
	raw := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	// base64 needs no JSON escapes: the string is quoted as it is.
	out := make([]byte, base64.StdEncoding.EncodedLen(len(raw))+2)
	out[0], out[len(out)-1] = '"', '"'
	base64.StdEncoding.Encode(out[1:len(out)-1], raw)
	return out, nil
}

// UnmarshalJSON decodes a base64 string; null and "" decode to a nil vector.
func (v *Vector) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = nil
		return nil
	}
	// A vector is a plain base64 string: no escapes to undo, so it is decoded as it
	// lies, without a second JSON scan of its kilobytes (replays decode millions).
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && bytes.IndexByte(b[1:n-1], '\\') < 0 {
		if out, ok := decodePlainVector(b[1 : n-1]); ok {
			*v = out
			return nil
		}
	}
	return v.unmarshalJSONString(b)
}

// vectorChunk is how many base64 characters decodePlainVector decodes at a time: 192
// float32s, a whole number of both base64 quanta and floats.
const vectorChunk = 1024

// decodePlainVector decodes the base64 src straight into the vector's floats, a chunk
// at a time through a buffer on the stack. It reports false for anything but a well
// formed vector, which unmarshalJSONString then refuses with the error it gives.
func decodePlainVector(src []byte) (Vector, bool) {
	if len(src) == 0 || len(src)%4 != 0 {
		return nil, false
	}
	size := len(src) / 4 * 3
	for i := len(src) - 1; i >= len(src)-2 && src[i] == '='; i-- {
		size--
	}
	if size%4 != 0 {
		return nil, false
	}
	out := make(Vector, size/4)
	var buf [vectorChunk / 4 * 3]byte
	at := 0
	for off := 0; off < len(src); off += vectorChunk {
		chunk := src[off:min(off+vectorChunk, len(src))]
		want := min(len(buf), size-4*at)
		m, err := base64.StdEncoding.Decode(buf[:], chunk)
		if err != nil || m != want {
			return nil, false // a padding inside, or not base64
		}
		for i := 0; i < m; i += 4 {
			out[at] = math.Float32frombits(binary.LittleEndian.Uint32(buf[i:]))
			at++
		}
	}
	return out, true
}

// unmarshalJSONString decodes any JSON string of base64, escapes and all.
func (v *Vector) unmarshalJSONString(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("events: vector: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("events: vector: %w", err)
	}
	if len(raw)%4 != 0 {
		return fmt.Errorf("events: vector: %d bytes is not a whole number of float32s", len(raw))
	}
	if len(raw) == 0 {
		*v = nil
		return nil
	}
	out := make(Vector, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	*v = out
	return nil
}
