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

// FuzzVectorMatchesItsSlowPath holds the vector's decoding of a plain base64 string
// (into the floats' memory) to its decoding through encoding/json and encoding/base64:
// the same vector, or a refusal of the same input; and a checked vector (the index's
// key embedding) to the same verdict.
func FuzzVectorMatchesItsSlowPath(f *testing.F) {
	for _, v := range []Vector{{1}, {0, -1, 0.5}, make(Vector, 384), {float32(math.NaN()), float32(math.Inf(-1))}} {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{`""`, `null`, `"AAAA"`, `"AAA=AAAA"`, `"AACAPw=="`, `"AACAPwAA"`, `"AACAPw="`,
		`"AACAP==="`, `"AACAPx=="`, `"AAC\u0041Pw=="`, `"AACA\nPw=="`, `" AACAPw=="`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return // a decoder hands a Vector only valid JSON
		}
		var got, want Vector
		gotErr := got.UnmarshalJSON(b)
		var wantErr error
		if string(b) == "null" {
			want = nil
		} else {
			wantErr = want.unmarshalJSONString(b)
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%s: error %v, the slow path's %v", b, gotErr, wantErr)
		}
		if gotErr == nil && !vectorsIdentical(got, want) {
			t.Fatalf("%s = %v, the slow path's %v", b, got, want)
		}
		if checkErr := (checkedVector{}).UnmarshalJSON(b); (checkErr == nil) != (wantErr == nil) {
			t.Fatalf("%s: checked %v, the slow path's %v", b, checkErr, wantErr)
		}
	})
}

// vectorsIdentical compares bit patterns, so NaNs compare as written.
func vectorsIdentical(a, b Vector) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
