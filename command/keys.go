package command

import (
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/userref"
)

// WithKeys wraps the data keys the write side stores (a revision's, an org's user
// reference key, a deferred extraction's) under the deployment's KEKs.
func WithKeys(r *kek.Ring) Option {
	return func(s *Service) {
		s.kek = r
		s.userRefs = userref.New(s.pool, r)
	}
}

// storedKey is a data key as the write side stores it: wrapped, when a KEK is
// configured (every process app.Open builds has one).
func (s *Service) storedKey(key []byte) ([]byte, error) {
	if s.kek == nil {
		return key, nil
	}
	return s.kek.Wrap(key)
}
