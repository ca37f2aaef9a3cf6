package memrow

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{
		`{"b":1,"a":[1.0,1e3,"x"]}`,
		`"\ud83d\ude00 <&> \\u0000"`,
		`{"a":{"a":{}},"é":null,"\u2028":true}`,
		`[-0,0.1e-2,"\"\\\/\b\f\n\r\t\u0001"]`,
		`{"a":1,"a":2}`,
		"\"\xff\"",
		`"\udc00"`,
		` 1 2 `,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c1, err := Canonical("value", raw)
		if err != nil {
			return
		}
		c2, err := Canonical("value", c1)
		if err != nil {
			t.Fatalf("canonical form %q of %q is refused: %v", c1, raw, err)
		}
		if !bytes.Equal(c1, c2) {
			t.Fatalf("not idempotent for %q:\n%q\n%q", raw, c1, c2)
		}
		if err := CheckJSONText("value", c1); err != nil {
			t.Fatalf("canonical form %q fails the text check: %v", c1, err)
		}
		// The canonical form must mean what the input meant.
		if !reflect.DeepEqual(decodeAny(t, raw), decodeAny(t, c1)) {
			t.Fatalf("meaning changed: %q -> %q", raw, c1)
		}
		if got, want := ValueText(c1), parsedValueText(c1); got != want {
			t.Fatalf("ValueText(%q) = %q, parsed %q", c1, got, want)
		}
	})
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("encoding/json refuses %q: %v", b, err)
	}
	return v
}

// A value answered as stored (a plain string) is what re-encoding it would answer.
func FuzzServedValue(f *testing.F) {
	for _, seed := range []string{`"the team lunch is on friday"`, `"café ☕ 😀"`, `"a \"quote\""`, `"tab\there"`, "\"\xff\"",
		`" padded" `, `{"b":1,"a":2}`, `"\u00e9"`, `""`, `"`, `"<&>"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, err := Canonical("value", raw)
		if err != nil {
			want = raw
		}
		if got := ServedValue(raw); !bytes.Equal(got, want) {
			t.Fatalf("ServedValue(%q) = %q; re-encoded %q", raw, got, want)
		}
	})
}

func BenchmarkServedValue(b *testing.B) {
	raw := json.RawMessage(`"the quarterly planning review moved to the large room on the third floor"`)
	for b.Loop() {
		ServedValue(raw)
	}
}
