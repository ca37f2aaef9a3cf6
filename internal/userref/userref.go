// Package userref holds each org's user reference key: the HMAC key under which the
// topic's plain fields name a user (events.UserRef) instead of carrying the user id.
// The key is made on an org's first write and kept in loom.user_ref_keys, wrapped under
// the deployment's KEK (internal/kek); it never changes, so a process caches it
// unwrapped. The org's name wrap key (loom.name_wrap_keys, migration 158), which wraps
// its users' name keys, is made beside it; that one is replaced at a KEK rotation
// (internal/atrest) and read only in SQL.
package userref

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/kek"
)

// Keys reads and makes the orgs' user reference keys.
type Keys struct {
	pool *pgxpool.Pool
	ring *kek.Ring // nil: kept unwrapped
	mu   sync.Mutex
	keys map[string][]byte
}

// New returns the keys kept in pool's database, wrapped under ring.
func New(pool *pgxpool.Pool, ring *kek.Ring) *Keys {
	return &Keys{pool: pool, ring: ring, keys: map[string][]byte{}}
}

// Key returns org's key, making it on the org's first call in the deployment.
func (k *Keys) Key(ctx context.Context, org string) ([]byte, error) {
	k.mu.Lock()
	key, ok := k.keys[org]
	k.mu.Unlock()
	if ok {
		return key, nil
	}
	fresh := make([]byte, events.UserRefKeySize)
	var err error
	if _, err = rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("make the user reference key of %s: %w", org, err)
	}
	stored := fresh
	if k.ring != nil {
		if stored, err = k.ring.Wrap(fresh); err != nil {
			return nil, err
		}
	}
	// The org's name wrap key is made with it (an org made before migration 158 gets
	// one here or from the at-rest pass, whichever comes first).
	_, wrapKey, err := kek.NewKey(k.ring)
	if err != nil {
		return nil, fmt.Errorf("make the name wrap key of %s: %w", org, err)
	}
	// Whichever process inserts first wins; every one reads the key that won (a second
	// read when the winner committed after this statement's snapshot).
	if _, err := k.pool.Exec(ctx, `WITH ref AS (INSERT INTO loom.user_ref_keys (org, key) VALUES ($1, $2) ON CONFLICT (org) DO NOTHING)
		INSERT INTO loom.name_wrap_keys (org, gen, key) VALUES ($1, 1, $3) ON CONFLICT (org) DO NOTHING`,
		org, stored, wrapKey); err != nil {
		return nil, fmt.Errorf("make the user reference key of %s: %w", org, err)
	}
	if err := k.pool.QueryRow(ctx, `SELECT key FROM loom.user_ref_keys WHERE org = $1`, org).Scan(&stored); err != nil {
		return nil, fmt.Errorf("read the user reference key of %s: %w", org, err)
	}
	if key, err = k.unwrap(stored); err != nil {
		return nil, fmt.Errorf("open the user reference key of %s: %w", org, err)
	}
	k.mu.Lock()
	k.keys[org] = key
	k.mu.Unlock()
	return key, nil
}

// Ref is userID's reference in org (events.UserRef).
func (k *Keys) Ref(ctx context.Context, org, userID string) (string, error) {
	key, err := k.Key(ctx, org)
	if err != nil {
		return "", err
	}
	return events.UserRef(key, userID)
}

// unwrap opens a stored key; one stored before LOOM_KEK is used as it is.
func (k *Keys) unwrap(stored []byte) ([]byte, error) {
	if k.ring == nil {
		if !kek.Raw(stored) {
			return nil, kek.ErrNotOpened
		}
		return stored, nil
	}
	return k.ring.Unwrap(stored)
}
