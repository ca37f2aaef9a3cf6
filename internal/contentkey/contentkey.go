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
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/jackc/pgx/v5/pgxpool"

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

// Cache holds the scopes' derived content keys, read from pool's loom.content_keys and
// unwrapped under ring (nil: only keys stored raw open).
type Cache struct {
	pool *pgxpool.Pool
	ring *kek.Ring
	keys *expirable.LRU[Scope, Key] // nil: nothing is cached (TTL 0)
}

// New returns a cache whose entries live for ttl (0: none is kept; every row hashes in SQL).
func New(pool *pgxpool.Pool, ring *kek.Ring, ttl time.Duration) *Cache {
	c := &Cache{pool: pool, ring: ring}
	if ttl > 0 {
		c.keys = expirable.NewLRU[Scope, Key](maxScopes, nil, ttl)
	}
	return c
}

// Keys answers the keys of scopes that have one, reading the ones not cached in one
// statement. A scope with no key yet (its first write makes it), or whose key this
// process cannot open, is left out: its rows hash in SQL.
func (c *Cache) Keys(ctx context.Context, scopes []Scope) (map[Scope]Key, error) {
	if c == nil || c.keys == nil || len(scopes) == 0 {
		return nil, nil
	}
	out := make(map[Scope]Key, len(scopes))
	var orgs, namespaces, users []string
	for _, s := range scopes {
		if _, seen := out[s]; seen {
			continue
		}
		if k, ok := c.keys.Get(s); ok {
			out[s] = k
			continue
		}
		orgs, namespaces, users = append(orgs, s.Org), append(namespaces, s.Namespace), append(users, s.UserRef)
	}
	if len(orgs) == 0 {
		return out, nil
	}
	if err := c.read(ctx, orgs, namespaces, users, out); err != nil {
		return nil, err
	}
	return out, nil
}

// read reads the stored keys of the scopes named by orgs, namespaces and users (one a
// position) into out, and caches them.
func (c *Cache) read(ctx context.Context, orgs, namespaces, users []string, out map[Scope]Key) error {
	rows, err := c.pool.Query(ctx, `SELECT k.org, k.namespace, k.user_id, k.key FROM loom.content_keys k
		JOIN unnest($1::text[], $2::text[], $3::text[]) AS s(org, namespace, user_id)
		  ON k.org = s.org AND k.namespace = s.namespace AND k.user_id = s.user_id`, orgs, namespaces, users)
	if err != nil {
		return fmt.Errorf("read the scopes' content keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s Scope
		var stored []byte
		if err := rows.Scan(&s.Org, &s.Namespace, &s.UserRef, &stored); err != nil {
			return fmt.Errorf("read the scopes' content keys: %w", err)
		}
		dataKey, err := kek.OpenKey(c.ring, stored)
		if err != nil {
			continue // under a KEK this process lacks: the statement's SQL decides
		}
		k := Key{Stored: stored, derived: derive(dataKey)}
		c.keys.Add(s, k)
		out[s] = k
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the scopes' content keys: %w", err)
	}
	return nil
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
