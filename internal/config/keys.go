package config

import (
	"github.com/loomplane/loom/internal/kek"
)

// Keys is how the data keys Loom stores in Postgres are kept: wrapped under the
// key-encryption key (internal/kek). Every process that reads or writes memories needs
// it; `loomd dev` and the test stores make one.
type Keys struct {
	// KEK is LOOM_KEK: base64 of 32 bytes, or a comma-separated list whose first wraps
	// and whose every one unwraps (a rotation).
	KEK string
}

func readKeys(r *reader) Keys {
	return Keys{KEK: r.str("LOOM_KEK", "")}
}

// Validate checks a configured KEK; an unset one is RequireStores's to refuse.
func (k Keys) Validate() error {
	if k.KEK == "" {
		return nil
	}
	_, err := kek.Parse(k.KEK)
	return err
}

// Ring is the configured KEKs.
func (k Keys) Ring() (*kek.Ring, error) { return kek.Parse(k.KEK) }
