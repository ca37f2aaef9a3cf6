package events

import (
	"errors"
	"reflect"
	"testing"
)

// TestSearchableContentMirrorsContent: searchableContent has Content's fields, name,
// tag and type (the key embedding's type apart), so a field added to Content is not
// silently dropped by the index's open.
func TestSearchableContentMirrorsContent(t *testing.T) {
	full, lean := reflect.TypeFor[Content](), reflect.TypeFor[searchableContent]()
	if full.NumField() != lean.NumField() {
		t.Fatalf("Content has %d fields, searchableContent %d", full.NumField(), lean.NumField())
	}
	for i := range full.NumField() {
		f, l := full.Field(i), lean.Field(i)
		if f.Name != l.Name || f.Tag != l.Tag || (f.Type != l.Type && f.Name != "KeyEmbedding") {
			t.Errorf("field %d: Content's %s %s %q, searchableContent's %s %s %q", i, f.Name, f.Type, f.Tag, l.Name, l.Type, l.Tag)
		}
	}
	c := Content{}
	for i := range full.NumField() {
		if full.Field(i).Name != "KeyEmbedding" {
			setNonZero(t, reflect.ValueOf(&c).Elem().Field(i))
		}
	}
	var s searchableContent
	for i := range full.NumField() {
		if full.Field(i).Name != "KeyEmbedding" {
			reflect.ValueOf(&s).Elem().Field(i).Set(reflect.ValueOf(c).Field(i))
		}
	}
	if got := s.content(); !reflect.DeepEqual(*got, c) {
		t.Fatalf("content() = %+v, want %+v", *got, c)
	}
}

func setNonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	default:
		t.Fatalf("a field of kind %s: teach setNonZero", v.Kind())
	}
}

// TestOpenSearchableAgreesWithOpen: the index's open gives Open's content without the
// key embedding, and refuses what Open refuses.
func TestOpenSearchableAgreesWithOpen(t *testing.T) {
	value, key, id := benchRecord(t)
	env, err := Decode(value)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Open(key, id, env.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.KeyEmbedding) == 0 {
		t.Fatal("the record has no key embedding to leave out")
	}
	got, err := OpenSearchableInPlace(key, id, env.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	want.KeyEmbedding = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("OpenSearchableInPlace = %+v, want %+v", got, want)
	}
	if _, err := OpenSearchableInPlace(key, id, env.Sealed); !errors.Is(err, ErrSealBroken) {
		t.Fatalf("a spent sealed content opened again: %v", err)
	}
	bad, err := Seal(key, id, &Content{MemoryKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	bad2, err := sealBytes(key, id, []byte(`{"memory_key":"k","key_embedding":"AAA"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSearchableInPlace(key, id, bad); err != nil {
		t.Fatalf("content without a key embedding: %v", err)
	}
	_, wantErr := Open(key, id, &Sealed{Alg: bad2.Alg, Nonce: bad2.Nonce, Ciphertext: append([]byte{}, bad2.Ciphertext...)})
	_, gotErr := OpenSearchableInPlace(key, id, bad2)
	if wantErr == nil || gotErr == nil || wantErr.Error() != gotErr.Error() {
		t.Fatalf("a broken key embedding: Open %v, OpenSearchableInPlace %v", wantErr, gotErr)
	}
}
