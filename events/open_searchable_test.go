package events

import (
	"errors"
	"reflect"
	"testing"
)

// TestSearchableContentKeepsEveryFieldButTheKeyEmbedding: every field of Content set
// survives the index's open as Open gives it, the key embedding apart, so a field
// added to Content is not silently dropped by the index's open.
func TestSearchableContentKeepsEveryFieldButTheKeyEmbedding(t *testing.T) {
	full := reflect.TypeFor[Content]()
	c := Content{}
	for i := range full.NumField() {
		setNonZero(t, reflect.ValueOf(&c).Elem().Field(i))
	}
	c.Value, c.Embedding, c.KeyEmbedding, c.ChunkEmbeddings = []byte(`"v"`), Vector{1}, Vector{2}, []Vector{{3}}
	key, id := make([]byte, dataKeySize), "acme/ns/1"
	sealed, err := Seal(key, id, &c)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Open(key, id, &Sealed{Alg: sealed.Alg, Nonce: sealed.Nonce, Ciphertext: append([]byte{}, sealed.Ciphertext...)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := OpenSearchableInPlace(key, id, sealed)
	if err != nil {
		t.Fatal(err)
	}
	want.KeyEmbedding = nil
	for i := range full.NumField() {
		name := full.Field(i).Name
		if name == "KeyEmbedding" {
			continue
		}
		if reflect.ValueOf(*want).Field(i).IsZero() {
			t.Fatalf("field %s did not survive Open: set it in this test", name)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("OpenSearchableInPlace = %+v, want %+v", got, want)
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
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem())
		v.Set(m)
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
