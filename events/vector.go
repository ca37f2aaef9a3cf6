package events

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"unsafe"

	// A replay decodes millions of vectors; the AVX2 decoder is about 7x the standard
	// library's on a 384-dim vector's 2 KiB.
	"github.com/segmentio/asm/base64"
)

// Vector is an embedding. It marshals as the standard base64 of its little-endian
// IEEE-754 float32s, about a third the size of a JSON number array and exact.
type Vector []float32

// MarshalJSON encodes v as a base64 string, or null when v is empty.
func (v Vector) MarshalJSON() ([]byte, error) {
	return appendVector(nil, v), nil
}

// UnmarshalJSON decodes a base64 string; null and "" decode to a nil vector.
func (v *Vector) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = nil
		return nil
	}
	if src, ok := plainBase64(b); ok {
		if out, ok := decodePlainVector(src); ok {
			*v = out
			return nil
		}
	}
	return v.unmarshalJSONString(b)
}

// plainBase64 is the JSON string b's content when it has no escapes to undo, as a
// vector's base64 never has: it is then decoded as it lies, without a second JSON scan
// of its kilobytes (replays decode millions).
func plainBase64(b []byte) ([]byte, bool) {
	n := len(b)
	if n < 2 || b[0] != '"' || b[n-1] != '"' || bytes.IndexByte(b[1:n-1], '\\') >= 0 {
		return nil, false
	}
	return b[1 : n-1], true
}

// plainVectorSize is the byte size of the vector the base64 src encodes, when src is
// whole quanta holding whole float32s.
func plainVectorSize(src []byte) (int, bool) {
	if len(src) == 0 || len(src)%4 != 0 {
		return 0, false
	}
	size := len(src) / 4 * 3
	for i := len(src) - 1; i >= len(src)-2 && src[i] == '='; i-- {
		size--
	}
	return size, size%4 == 0
}

// decodePlainVector decodes the base64 src straight into the vector's floats: on a
// little-endian machine a float32's wire bytes are its bytes in memory, so the decoder
// writes them in place (a replay decodes millions of vectors; a float at a time was a
// third of a vector's decoding). It reports false for anything but a well formed
// vector, which unmarshalJSONString then refuses with the error it gives.
func decodePlainVector(src []byte) (Vector, bool) {
	size, ok := plainVectorSize(src)
	if !ok {
		return nil, false
	}
	if !littleEndian() {
		return decodeVectorByFloat(src, size)
	}
	// Room for every byte the decoder may write (a padded tail's too); the vector is
	// the floats of size bytes.
	out := make(Vector, (base64.StdEncoding.DecodedLen(len(src))+3)/4)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(out))), 4*len(out))
	m, err := base64.StdEncoding.Decode(raw, src)
	if err != nil || m != size {
		return nil, false // a padding inside, or not base64
	}
	return out[: size/4 : size/4], true
}

// littleEndian reports whether this machine stores a float32 as its wire bytes.
func littleEndian() bool {
	return binary.NativeEndian.Uint16([]byte{1, 0}) == 1
}

// decodeVectorByFloat is decodePlainVector for a big-endian machine: a float at a time
// out of each decoded chunk.
func decodeVectorByFloat(src []byte, size int) (Vector, bool) {
	out := make(Vector, 0, size/4)
	ok := eachVectorChunk(src, size, func(raw []byte) {
		for i := 0; i < len(raw); i += 4 {
			out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
		}
	})
	return out, ok
}

// vectorChunk is how many base64 characters eachVectorChunk decodes at a time: 192
// float32s, a whole number of both base64 quanta and floats.
const vectorChunk = 1024

// eachVectorChunk decodes the base64 src of a size-byte vector a chunk at a time into
// a buffer on the stack, handing each to fn; it reports false, having stopped, at a
// padding inside or anything not base64.
func eachVectorChunk(src []byte, size int, fn func(raw []byte)) bool {
	var buf [vectorChunk / 4 * 3]byte
	at := 0
	for off := 0; off < len(src); off += vectorChunk {
		chunk := src[off:min(off+vectorChunk, len(src))]
		want := min(len(buf), size-at)
		m, err := base64.StdEncoding.Decode(buf[:], chunk)
		if err != nil || m != want {
			return false
		}
		fn(buf[:m])
		at += m
	}
	return true
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
