package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// decodeStd is Decode as encoding/json alone decodes: the behaviour Decode keeps.
func decodeStd(b []byte) (*Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	out := normalised(&e)
	return out, validate(out)
}

// FuzzDecodeMatchesEncodingJSON holds Decode, and the decoding of opened content, to
// encoding/json's verdicts and values: a record either decodes as it always did, or is
// refused as it always was.
func FuzzDecodeMatchesEncodingJSON(f *testing.F) {
	value, key, id := benchRecord(f)
	f.Add(value)
	env, err := Decode(value)
	if err != nil {
		f.Fatal(err)
	}
	plain, err := openBytes(key, id, env.Sealed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(plain)
	for _, typ := range []Type{TypeWritten, TypeRedacted, TypeTombstoned} {
		b, err := Encode(revisionEnvelope(&testing.T{}, typ, 7, typ == TypeTombstoned))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, typ := range []Type{TypeErased, TypeParked} {
		b, err := Encode(plainEnvelope(typ, 9))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"memory_key":"k","value":"\u00e9\ud800","tags":null,"embedding":"AACAPw==","KEY_EMBEDDING":"","relations":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		want, wantErr := decodeStd(b)
		got, gotErr := Decode(b)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("Decode(%q): error %v, encoding/json's %v", b, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %+v, encoding/json's %+v", b, got, want)
		}
		if wantErr != nil && !errors.Is(gotErr, ErrInvalidEnvelope) {
			t.Fatalf("Decode(%q): error %v does not wrap ErrInvalidEnvelope", b, gotErr)
		}
		var wantC Content
		wantCErr := json.Unmarshal(b, &wantC)
		gotC, gotCErr := unmarshal[Content](b)
		if (wantCErr == nil) != (gotCErr == nil) {
			t.Fatalf("content %q: error %v, encoding/json's %v", b, gotCErr, wantCErr)
		}
		if wantCErr == nil && !reflect.DeepEqual(*gotC, wantC) {
			t.Fatalf("content %q = %+v, encoding/json's %+v", b, *gotC, wantC)
		}
		gotS, gotSErr := unmarshal[searchableContent](b)
		if (wantCErr == nil) != (gotSErr == nil) {
			t.Fatalf("searchable content %q: error %v, encoding/json's %v", b, gotSErr, wantCErr)
		}
		if wantCErr == nil {
			wantC.KeyEmbedding = nil
			if got := gotS.content(); !reflect.DeepEqual(*got, wantC) {
				t.Fatalf("searchable content %q = %+v, encoding/json's %+v", b, *got, wantC)
			}
		}
	})
}

// TestDecodeTimesAsEncodingJSON: a time is read as encoding/json reads it (RFC 3339,
// strictly), whichever way it is written.
func TestDecodeTimesAsEncodingJSON(t *testing.T) {
	b, err := Encode(plainEnvelope(TypeParked, 9))
	if err != nil {
		t.Fatal(err)
	}
	written, err := json.Marshal(committedAt)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := map[bool]int{}
	for _, at := range []string{
		"2026-03-14T09:26:53Z", "2026-03-14T09:26:53.5Z", "2026-03-14T09:26:53.123456789Z",
		"2026-03-14T09:26:53.1234567891Z", "2026-03-14T09:26:53+01:00", "2026-03-14T09:26:53.25-07:30",
		"2026-03-14t09:26:53z", "2026-03-14 09:26:53Z", "2026-03-14T9:26:53Z", "2026-03-14T09:26:53.Z",
		"2026-03-14T09:26:53,5Z", "2026-03-14T09:26:53+24:00", "2026-03-14T09:26:53+01:60", "2026-03-14T24:00:00Z",
		"2026-02-29T09:26:53Z", "2024-02-29T09:26:53Z", "2026-03-14T09:26:60Z", "2026-03-14T09:26:53",
		"+2026-03-14T09:26:53Z", "0000-01-01T00:00:00Z", "2026-03-14T09:26:53+0100", "2026-03-14T09:26:53.000000000Z",
		"2026-03-14T09:26:53-00:00", "2026-13-14T09:26:53Z", "2026-03-14T09:26:53Zjunk", `2026-03-14T09:26:53\u005a`,
	} {
		rec := replaceOnce(b, written, []byte(`"`+at+`"`))
		want, wantErr := decodeStd(rec)
		got, gotErr := Decode(rec)
		if (wantErr == nil) != (gotErr == nil) || wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("committed_at %s: Decode %+v, %v; encoding/json %+v, %v", at, got, gotErr, want, wantErr)
		}
		verdicts[wantErr == nil]++
	}
	if verdicts[true] == 0 || verdicts[false] == 0 {
		t.Fatalf("the times were all accepted or all refused: %v", verdicts)
	}
}

func replaceOnce(b, old, new []byte) []byte {
	i := bytes.Index(b, old)
	if i < 0 {
		panic("replaceOnce: not found")
	}
	return append(append(append([]byte{}, b[:i]...), new...), b[i+len(old):]...)
}
