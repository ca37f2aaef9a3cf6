package auth

import (
	"context"
	"crypto/sha256"
)

// PauseAfterRead makes s run f between a lookup's read of a token's row and its cache
// add: a test holds a lookup there while a revocation or an erasure commits.
func PauseAfterRead(s *Store, f func()) { s.afterRead = f }

// Purges is how many times s's token cache was emptied.
func Purges(s *Store) uint64 { return s.purges.Load() }

// HoldOffListens makes the LISTEN of s's FollowRevocations fail while f answers an
// error (set before FollowRevocations starts).
func HoldOffListens(s *Store, f func(context.Context) error) { s.holdOffListens = f }

// Cached reports whether s's cache would answer secret without reading its row.
func Cached(s *Store, secret string) bool {
	sum := sha256.Sum256([]byte(secret))
	c, ok := s.cache.Get(string(sum[:]))
	return ok && c.purges == s.purges.Load() && s.hearsRevocations()
}
