package events

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
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
	return json.Marshal(base64.StdEncoding.EncodeToString(raw))
}

// UnmarshalJSON decodes a base64 string; null and "" decode to a nil vector.
func (v *Vector) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = nil
		return nil
	}
	// A vector is a plain base64 string: no escapes to undo, so it is decoded as it
	// lies, without a second JSON scan of its kilobytes (replays decode millions).
	var raw []byte
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && bytes.IndexByte(b[1:n-1], '\\') < 0 {
		raw = make([]byte, base64.StdEncoding.DecodedLen(n-2))
		m, err := base64.StdEncoding.Decode(raw, b[1:n-1])
		if err != nil {
			return fmt.Errorf("events: vector: %w", err)
		}
		raw = raw[:m]
	} else {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("events: vector: %w", err)
		}
		var err error
		if raw, err = base64.StdEncoding.DecodeString(s); err != nil {
			return fmt.Errorf("events: vector: %w", err)
		}
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
