package searchindex

import (
	"cmp"
	"math/rand"
	"strings"
	"testing"
)

// TestKeyPrefixOrdersAsTheKeys checks that where two keys' prefixes differ, they
// order as the keys do, so that ranking ties by prefix before the strings ranks them as
// the strings alone did: keys of every length around eight bytes, one the start of
// another, NUL bytes and bytes past 0x7f.
func TestKeyPrefixOrdersAsTheKeys(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := []byte{0, 1, '0', '9', 'a', 'k', 0x7f, 0x80, 0xff}
	key := func() string {
		b := make([]byte, rng.Intn(12))
		for i := range b {
			b[i] = alphabet[rng.Intn(len(alphabet))]
		}
		return string(b)
	}
	fixed := []string{"", "a", "a\x00", "a\x00b", "k0000001", "k0000001x", "k0000002", "k000000", "\xff\xff\xff\xff\xff\xff\xff\xff"}
	keys := append([]string(nil), fixed...)
	for range 2000 {
		keys = append(keys, key())
	}
	for _, a := range keys {
		for _, b := range keys[:200] {
			pa, pb := keyPrefix(a), keyPrefix(b)
			if pa != pb && cmp.Compare(pa, pb) != strings.Compare(a, b) {
				t.Fatalf("keys %q and %q: prefixes order %d, keys %d", a, b, cmp.Compare(pa, pb), strings.Compare(a, b))
			}
		}
	}
}
