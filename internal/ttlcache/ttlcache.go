// Package ttlcache is a bounded LRU whose entries expire a fixed time after they were
// added. It is golang-lru's plain LRU with the expiry checked on read, instead of
// golang-lru's expirable LRU: v2.0.7's background reaper panics in deleteExpired
// (hashicorp/golang-lru#181), which took whole test processes down here.
package ttlcache

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Cache is safe for concurrent use.
type Cache[K comparable, V any] struct {
	entries *lru.Cache[K, entry[V]]
	ttl     time.Duration
	now     func() time.Time
}

type entry[V any] struct {
	value   V
	expires time.Time
}

// New holds at most size entries (size > 0), each for ttl; a ttl of 0 or less never
// expires one (the size alone bounds them), as golang-lru's expirable LRU did.
func New[K comparable, V any](size int, ttl time.Duration) *Cache[K, V] {
	entries, err := lru.New[K, entry[V]](size)
	if err != nil {
		panic("ttlcache: " + err.Error()) // only a size of 0 or less fails: a programming error
	}
	return &Cache[K, V]{entries: entries, ttl: ttl, now: time.Now}
}

// Get answers the value of key unless it is absent or expired (an expired one is removed).
func (c *Cache[K, V]) Get(key K) (V, bool) {
	e, ok := c.entries.Get(key)
	if !ok {
		var zero V
		return zero, false
	}
	if c.ttl > 0 && !c.now().Before(e.expires) {
		c.entries.Remove(key)
		var zero V
		return zero, false
	}
	return e.value, true
}

// Add sets key's value, expiring ttl from now.
func (c *Cache[K, V]) Add(key K, value V) {
	c.entries.Add(key, entry[V]{value: value, expires: c.now().Add(c.ttl)})
}

// Remove forgets key.
func (c *Cache[K, V]) Remove(key K) { c.entries.Remove(key) }

// Purge forgets every entry.
func (c *Cache[K, V]) Purge() { c.entries.Purge() }
