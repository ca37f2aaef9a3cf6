package auth

// PauseAfterRead makes s run f between a lookup's read of a token's row and its cache
// add: a test holds a lookup there while a revocation or an erasure commits.
func PauseAfterRead(s *Store, f func()) { s.afterRead = f }

// Purges is how many times s's token cache was emptied.
func Purges(s *Store) uint64 { return s.purges.Load() }
