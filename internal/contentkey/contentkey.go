// Package contentkey keeps, for a bounded number of scopes (org, namespace, user
// reference), the key a scope's stored content hashes are keyed under (migration 101):
// HMAC-SHA256(data key, 'loom.content'), derived from the scope's data key in
// loom.content_keys, unwrapped under the KEK in Go. The commit hashes a row's plain
// digest with it instead of loom.content_hash doing so in plpgsql, and binds the hash
// with the stored (wrapped) key bytes it came from: the statement keeps it only while
// those are still the scope's key, and otherwise hashes in SQL. So an entry is never
// used against another key (an erasure destroyed it and a write made a new one, or the
// at-rest pass wrapped it again); it lives for at most the TTL, and the process that
// runs an erasure forgets the scopes it destroys at once.
package contentkey

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/kek"
)

// maxScopes bounds the cache: the scopes a process writes to within a TTL.
const maxScopes = 4096

// Scope is a content key's scope as loom.content_keys keys it: the user by its
// reference, "" for rows of no user.
type Scope struct{ Org, Namespace, UserRef string }

// Key is a scope's derived content key and the stored (wrapped) key it was derived
// from, which the commit's statement compares with the scope's stored key.
type Key struct {
	Stored  []byte
	derived []byte
}

// Hash is the keyed content hash of a plain digest (its hex), as loom.content_hash
// computes it: HMAC-SHA256(sha, HMAC-SHA256(data key, 'loom.content')), hex.
func (k Key) Hash(sha string) string {
	m := hmac.New(sha256.New, k.derived)
	m.Write([]byte(sha))
	return hex.EncodeToString(m.Sum(nil))
}

// derive is the content key of a scope whose data key is dataKey.
func derive(dataKey []byte) []byte {
	m := hmac.New(sha256.New, dataKey)
	m.Write([]byte("loom.content"))
	return m.Sum(nil)
}

// Cache holds the scopes' derived content keys, read from loom.content_keys in the
// commits' transactions and unwrapped under ring (nil: only keys stored raw open).
type Cache struct {
	ring *kek.Ring
	keys *expirable.LRU[Scope, Key] // nil: nothing is cached (TTL 0)
}

// New returns a cache whose entries live for ttl (0: none is kept; every row hashes in SQL).
func New(ring *kek.Ring, ttl time.Duration) *Cache {
	c := &Cache{ring: ring}
	if ttl > 0 {
		c.keys = expirable.NewLRU[Scope, Key](maxScopes, nil, ttl)
	}
	return c
}

// Cached answers the keys of scopes this process holds, and the distinct scopes it
// does not (their rows hash in SQL; Read fills them from the commit's own round trip).
func (c *Cache) Cached(scopes []Scope) (map[Scope]Key, []Scope) {
	if c == nil || c.keys == nil || len(scopes) == 0 {
		return nil, nil
	}
	out := make(map[Scope]Key, len(scopes))
	seen := make(map[Scope]bool, len(scopes))
	var missing []Scope
	for _, s := range scopes {
		if seen[s] {
			continue
		}
		seen[s] = true
		if k, ok := c.keys.Get(s); ok {
			out[s] = k
			continue
		}
		missing = append(missing, s)
	}
	return out, missing
}

// Read is a read of scopes' stored keys queued in a transaction's batch, kept once
// the transaction commits: a scope's first write makes its key in that transaction,
// and the read sees it, so no write takes a round trip of its own for its keys.
type Read struct {
	cache  *Cache
	scopes []Scope
	stored map[Scope][]byte
}

// Read returns the read of scopes' stored keys (nil when there are none to read).
func (c *Cache) Read(scopes []Scope) *Read {
	if c == nil || c.keys == nil || len(scopes) == 0 {
		return nil
	}
	return &Read{cache: c, scopes: scopes, stored: make(map[Scope][]byte, len(scopes))}
}

// Queue queues the read on b, after the statements that make the scopes' keys.
func (r *Read) Queue(b *pgx.Batch) {
	if r == nil {
		return
	}
	orgs, namespaces, users := make([]string, len(r.scopes)), make([]string, len(r.scopes)), make([]string, len(r.scopes))
	for i, s := range r.scopes {
		orgs[i], namespaces[i], users[i] = s.Org, s.Namespace, s.UserRef
	}
	b.Queue(`SELECT k.org, k.namespace, k.user_id, k.key FROM loom.content_keys k
		JOIN unnest($1::text[], $2::text[], $3::text[]) AS s(org, namespace, user_id)
		  ON k.org = s.org AND k.namespace = s.namespace AND k.user_id = s.user_id`, orgs, namespaces, users).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var s Scope
				var stored []byte
				if err := rows.Scan(&s.Org, &s.Namespace, &s.UserRef, &stored); err != nil {
					return fmt.Errorf("read the scopes' content keys: %w", err)
				}
				r.stored[s] = stored
			}
			return rows.Err()
		})
}

// Keep caches what the read found: called once its transaction committed, so a key
// made by a transaction that rolled back is never kept.
func (r *Read) Keep() {
	if r == nil {
		return
	}
	for s, stored := range r.stored {
		dataKey, err := kek.OpenKey(r.cache.ring, stored)
		if err != nil {
			continue // under a KEK this process lacks: the statement's SQL decides
		}
		r.cache.keys.Add(s, Key{Stored: stored, derived: derive(dataKey)})
	}
}

// Forget drops the scopes' entries: an erasure destroyed their keys.
func (c *Cache) Forget(scopes ...Scope) {
	if c == nil || c.keys == nil {
		return
	}
	for _, s := range scopes {
		c.keys.Remove(s)
	}
}
