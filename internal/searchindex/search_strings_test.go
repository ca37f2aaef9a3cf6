package searchindex

import (
	"crypto/rand"
	"testing"

	"github.com/google/uuid"
)

// A peer's memory id is written as uuid.UUID.String writes it: the write's verdict
// compares it with the heads' ids.
func TestEncodeUUIDWritesWhatUUIDStringWrites(t *testing.T) {
	for i := 0; i < 100; i++ {
		var u [16]byte
		rand.Read(u[:])
		var got [36]byte
		encodeUUID(&got, u)
		if want := uuid.UUID(u).String(); string(got[:]) != want {
			t.Fatalf("encodeUUID(%x) = %s, want %s", u, got[:], want)
		}
	}
}
