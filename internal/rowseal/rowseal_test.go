package rowseal

import (
	"bytes"
	"testing"
)

func TestOpenOpensWhatSealSealedAndRefusesAnotherKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	for _, plain := range []string{"", "a", "exactly sixteen!", "a longer text that spans several AES blocks of sixteen bytes"} {
		sealed, err := Seal(key, LabelChunk, []byte(plain))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Open(key, LabelChunk, sealed)
		if err != nil || string(got) != plain {
			t.Fatalf("Open(Seal(%q)) = %q, %v", plain, got, err)
		}
	}
	sealed, _ := Seal(key, LabelChunk, []byte("a secret turn"))
	if got, err := Open(bytes.Repeat([]byte{8}, 32), LabelChunk, sealed); err == nil && string(got) == "a secret turn" {
		t.Fatalf("another key opened it")
	}
	if got, err := Open(key, LabelTurn, sealed); err == nil && string(got) == "a secret turn" {
		t.Fatalf("another label opened it")
	}
}
