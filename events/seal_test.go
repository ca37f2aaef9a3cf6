package events

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestSealOpenRoundTrip(t *testing.T) {
	key, err := NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	if len(key) != 32 {
		t.Fatalf("data key is %d bytes, want 32", len(key))
	}
	want := &Content{
		MemoryKey: "customer.tier",
		Value:     json.RawMessage(`{"tier":"gold","note":"<b>VIP</b> & co","n":[1,2.5,null]}`),
		Tags:      []string{"billing", "tier"},
		Entities:  []string{"customer:42"},
		Embedding: Vector{0.1, -0.2, 3.4028235e38, 1e-45},
	}
	const id = "acme/support/7"
	s, err := Seal(key, id, want)
	if err != nil {
		t.Fatal(err)
	}
	if s.Alg != SealAlg || len(s.Nonce) != 12 {
		t.Fatalf("sealed alg %q nonce %d bytes", s.Alg, len(s.Nonce))
	}
	got, err := Open(key, id, s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("opened %+v\nwant %+v", got, want)
	}
	if string(got.Value) != string(want.Value) {
		t.Fatalf("value %s, want it byte for byte %s", got.Value, want.Value)
	}
}

// OpenInPlace opens what Open opens, and its content does not change when the
// ciphertext it decrypted over is reused (nothing of the content aliases it); the
// sealed value is spent.
func TestOpenInPlaceOpensWhatOpenOpens(t *testing.T) {
	key, err := NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	want := &Content{MemoryKey: "travel.seat", Value: json.RawMessage(`"window, morning flights"`), Tags: []string{"travel"},
		Embedding: Vector{0.25, -1.5, 3}, KeyEmbedding: Vector{1, 2}, UserID: "u-1", ContentSHA256: "ab"}
	const id = "acme/support/8"
	s, err := Seal(key, id, want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := OpenInPlace(key, id, s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Ciphertext[:cap(s.Ciphertext)] {
		s.Ciphertext[:cap(s.Ciphertext)][i] = 'x'
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("opened in place %+v\nwant %+v", got, want)
	}
	if _, err := Open(key, id, s); !errors.Is(err, ErrSealBroken) {
		t.Fatalf("a spent seal opened again: %v", err)
	}
}

func TestSealUsesFreshNonce(t *testing.T) {
	key, _ := NewDataKey()
	c := &Content{MemoryKey: "k", Value: json.RawMessage(`1`)}
	a, err := Seal(key, "o/n/1", c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Seal(key, "o/n/1", c)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Nonce) == string(b.Nonce) || string(a.Ciphertext) == string(b.Ciphertext) {
		t.Fatal("two seals of the same content share a nonce or ciphertext")
	}
}

func TestOpenRejectsBrokenSeals(t *testing.T) {
	key, _ := NewDataKey()
	otherKey, _ := NewDataKey()
	const id = "acme/support/7"
	s, err := Seal(key, id, &Content{MemoryKey: "k", Value: json.RawMessage(`"secret"`), Tags: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	flipped := func(b []byte, i int) []byte {
		out := append([]byte(nil), b...)
		out[i] ^= 0x01
		return out
	}
	cases := []struct {
		name string
		key  []byte
		id   string
		s    *Sealed
	}{
		{"wrong key", otherKey, id, s},
		{"wrong record id", key, "acme/support/8", s},
		{"record moved to another namespace", key, "acme/sales/7", s},
		{"flipped ciphertext byte", key, id, &Sealed{Alg: s.Alg, Nonce: s.Nonce, Ciphertext: flipped(s.Ciphertext, 0)}},
		{"flipped tag byte", key, id, &Sealed{Alg: s.Alg, Nonce: s.Nonce, Ciphertext: flipped(s.Ciphertext, len(s.Ciphertext)-1)}},
		{"flipped nonce byte", key, id, &Sealed{Alg: s.Alg, Nonce: flipped(s.Nonce, 3), Ciphertext: s.Ciphertext}},
		{"short nonce", key, id, &Sealed{Alg: s.Alg, Nonce: s.Nonce[:8], Ciphertext: s.Ciphertext}},
		{"truncated ciphertext", key, id, &Sealed{Alg: s.Alg, Nonce: s.Nonce, Ciphertext: s.Ciphertext[:10]}},
		{"wrong alg", key, id, &Sealed{Alg: "A128GCM", Nonce: s.Nonce, Ciphertext: s.Ciphertext}},
		{"AES-128 key", key[:16], id, s},
		{"no key (destroyed)", nil, id, s},
		{"nil sealed", key, id, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Open(tc.key, tc.id, tc.s)
			if !errors.Is(err, ErrSealBroken) {
				t.Fatalf("Open = %+v, %v; want ErrSealBroken", c, err)
			}
		})
	}
}

func TestSealRejectsBadInput(t *testing.T) {
	key, _ := NewDataKey()
	if _, err := Seal(key[:16], "o/n/1", &Content{Value: json.RawMessage(`1`)}); err == nil {
		t.Error("Seal accepted a 16-byte key")
	}
	if _, err := Seal(key, "o/n/1", nil); err == nil {
		t.Error("Seal accepted nil content")
	}
	if _, err := Seal(key, "o/n/1", &Content{Value: json.RawMessage(`{not json`)}); err == nil {
		t.Error("Seal accepted a value that is not JSON")
	}
}
