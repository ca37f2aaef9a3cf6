package kek

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func ring(t *testing.T, setting string) *Ring {
	t.Helper()
	r, err := Parse(setting)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWrapUnwrapsUnderTheRingAndRotates(t *testing.T) {
	old, _ := Generate()
	fresh, _ := Generate()
	key := bytes.Repeat([]byte{7}, KeySize)

	before := ring(t, old)
	wrapped, err := before.Wrap(key)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrapped) != WrappedSize || bytes.Contains(wrapped, key[:8]) {
		t.Fatalf("wrapped key %x holds the key in the clear", wrapped)
	}
	again, _ := before.Wrap(key)
	if bytes.Equal(again, wrapped) {
		t.Fatal("two wraps of one key are equal: the IV is not fresh")
	}
	if got, err := before.Unwrap(wrapped); err != nil || !bytes.Equal(got, key) {
		t.Fatalf("unwrap: %x, %v", got, err)
	}
	if !before.Current(wrapped) {
		t.Fatal("a key wrapped under the first KEK is not current")
	}

	// Rotation: the new KEK wraps, the old one still unwraps.
	rotated := ring(t, fresh+","+old)
	if got, err := rotated.Unwrap(wrapped); err != nil || !bytes.Equal(got, key) {
		t.Fatalf("the rotated ring does not unwrap a key of the old KEK: %v", err)
	}
	if rotated.Current(wrapped) {
		t.Fatal("a key of the old KEK counts as current after a rotation")
	}
	if _, err := ring(t, fresh).Unwrap(wrapped); !errors.Is(err, ErrNotOpened) {
		t.Fatalf("a ring without the KEK unwraps: %v", err)
	}

	// A damaged key is refused, not opened to garbage.
	broken := append([]byte(nil), wrapped...)
	broken[headerSize] ^= 1
	if _, err := before.Unwrap(broken); !errors.Is(err, ErrNotOpened) {
		t.Fatalf("a damaged key unwraps: %v", err)
	}

	// A key stored before LOOM_KEK is used as it is.
	if got, err := rotated.Unwrap(key); err != nil || !bytes.Equal(got, key) || !Raw(key) {
		t.Fatalf("a raw key: %x, %v", got, err)
	}
}

func TestParseRefusesWhatIsNotAKEK(t *testing.T) {
	k, _ := Generate()
	for _, bad := range []string{"", "not base64", "c2hvcnQ=", k + "," + k, k + ","} {
		if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), "LOOM_KEK") {
			t.Errorf("Parse(%q) = %v, want an error naming LOOM_KEK", bad, err)
		}
	}
	r := ring(t, k)
	if v := r.SessionValue(); strings.Contains(v, k) || len(v) != 16+1+64 {
		t.Fatalf("session value %q", v)
	}
}
