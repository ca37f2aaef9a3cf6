package events

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

func TestVectorJSONRoundTrip(t *testing.T) {
	want := Vector{0, 1, -1, 0.5, float32(math.Inf(1)), math.SmallestNonzeroFloat32, math.MaxFloat32}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got Vector
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip %v, want %v", got, want)
	}
}

func TestVectorWireFormat(t *testing.T) {
	// 1.0 is 0x3f800000; little-endian puts 0x3f last.
	b, err := json.Marshal(Vector{1})
	if err != nil {
		t.Fatal(err)
	}
	if want := `"` + base64.StdEncoding.EncodeToString([]byte{0, 0, 0x80, 0x3f}) + `"`; string(b) != want {
		t.Fatalf("Vector{1} marshals as %s, want %s", b, want)
	}
}

func TestVectorEmpty(t *testing.T) {
	for _, v := range []Vector{nil, {}} {
		b, err := json.Marshal(v)
		if err != nil || string(b) != "null" {
			t.Fatalf("empty vector marshals as %s, %v; want null", b, err)
		}
	}
	for _, in := range []string{`null`, `""`} {
		v := Vector{1}
		if err := json.Unmarshal([]byte(in), &v); err != nil || v != nil {
			t.Fatalf("%s unmarshals as %v, %v; want nil", in, v, err)
		}
	}
	// omitempty drops an empty embedding from sealed content altogether.
	b, _ := json.Marshal(Content{Embedding: Vector{}})
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["embedding"]; ok {
		t.Fatalf("content with empty embedding marshals as %s", b)
	}
}

func TestVectorRejectsBadInput(t *testing.T) {
	cases := map[string]string{
		"3 bytes":        `"` + base64.StdEncoding.EncodeToString([]byte{1, 2, 3}) + `"`,
		"5 bytes":        `"` + base64.StdEncoding.EncodeToString([]byte{1, 2, 3, 4, 5}) + `"`,
		"not base64":     `"***"`,
		"number array":   `[1.0, 2.0]`,
		"number":         `1`,
		"url base64 '-'": `"-_-_"`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			var v Vector
			if err := json.Unmarshal([]byte(in), &v); err == nil {
				t.Fatalf("%s unmarshalled as %v", in, v)
			}
		})
	}
}
