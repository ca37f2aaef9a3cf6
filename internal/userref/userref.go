// Package userref holds each org's user reference key: the HMAC key under which the
// topic's plain fields name a user (events.UserRef) instead of carrying the user id.
// The key is made on an org's first write and kept in loom.user_ref_keys, wrapped under
// the deployment's KEK (internal/kek). Each key has a generation (migration 181): a
// rotation replaces the current key and keeps the one it replaced as retired while it
// rewrites the org's references, so a process caches the keys unwrapped and reads their
// generation again (beside the request, in the background) once its copy is older than
// generationTTL. The org's name wrap key
// (loom.name_wrap_keys, migration 158), which wraps its users' name keys, is made
// beside it; that one is replaced at a KEK rotation (internal/atrest) and read only in
// SQL.
package userref

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/kek"
)

// generationTTL bounds how long a process names an org's rows under a key it cached
// without reading the key's generation again: a rotation's swap reaches every process
// within it (and the read's own time). The read runs beside the request that found the
// copy stale, which goes on with the copy, so the write path pays no round trip for it;
// a LISTEN would hold a connection per Keys (several a process) and still need this
// bound for a notification lost on a connection not yet found dead.
const generationTTL = time.Second

// StaleLimit is how old a copy may grow while its background reads fail (Postgres
// down, a retired key this process cannot open): past it a caller reads the
// generation itself and answers the error, rather than name rows under a key a
// rotation may have replaced. It is the bound after a rotation's swap past which no
// process starts naming rows under the retired key: a rotation (internal/atrest)
// waits it out, plus the longest commit, before it rewrites the org's references.
const StaleLimit = 10 * generationTTL

// refreshTimeout bounds a background read of an org's generation.
const refreshTimeout = 5 * time.Second

// Generation is one of an org's user reference keys, unwrapped, with its generation.
type Generation struct {
	Gen int
	Key []byte
}

// orgKeys is what a process holds of one org's keys.
type orgKeys struct {
	current Generation
	retired *Generation // the key a running rotation replaces; nil while none runs
	readAt  time.Time   // when the generation was last read
}

// Keys reads and makes the orgs' user reference keys.
type Keys struct {
	pool       *pgxpool.Pool
	ring       *kek.Ring // nil: kept unwrapped
	mu         sync.Mutex
	keys       map[string]orgKeys
	refreshing map[string]bool // the orgs whose generation a background read is reading
}

// New returns the keys kept in pool's database, wrapped under ring.
func New(pool *pgxpool.Pool, ring *kek.Ring) *Keys {
	return &Keys{pool: pool, ring: ring, keys: map[string]orgKeys{}, refreshing: map[string]bool{}}
}

// Key returns org's current key, making it on the org's first call in the deployment.
func (k *Keys) Key(ctx context.Context, org string) ([]byte, error) {
	g, err := k.Current(ctx, org)
	return g.Key, err
}

// Current returns org's current key and its generation, making the key on the org's
// first call in the deployment.
func (k *Keys) Current(ctx context.Context, org string) (Generation, error) {
	o, err := k.org(ctx, org)
	return o.current, err
}

// Live returns org's keys a lookup by clear value must match: the current one first,
// then the retired one while a rotation runs.
func (k *Keys) Live(ctx context.Context, org string) ([]Generation, error) {
	o, err := k.org(ctx, org)
	if err != nil {
		return nil, err
	}
	if o.retired == nil {
		return []Generation{o.current}, nil
	}
	return []Generation{o.current, *o.retired}, nil
}

// Ref is userID's reference in org (events.UserRef) under the current key.
func (k *Keys) Ref(ctx context.Context, org, userID string) (string, error) {
	key, err := k.Key(ctx, org)
	if err != nil {
		return "", err
	}
	return events.UserRef(key, userID)
}

// Refs are userID's references in org under every live key (Live's order): what a
// lookup by the clear id matches while a rotation runs.
func (k *Keys) Refs(ctx context.Context, org, userID string) ([]string, error) {
	live, err := k.Live(ctx, org)
	if err != nil {
		return nil, err
	}
	refs := make([]string, len(live))
	for i, g := range live {
		if refs[i], err = events.UserRef(g.Key, userID); err != nil {
			return nil, err
		}
	}
	return refs, nil
}

// CurrentRef is userID's reference in org under the current key, and that key's
// generation: what a record naming the user carries (and its ce_loomrefgen).
func (k *Keys) CurrentRef(ctx context.Context, org, userID string) (string, int, error) {
	g, err := k.Current(ctx, org)
	if err != nil {
		return "", 0, err
	}
	ref, err := events.UserRef(g.Key, userID)
	return ref, g.Gen, err
}

// org returns what the process holds of org's keys. A copy older than generationTTL
// is answered while a background read checks its generation (refresh); one older than
// StaleLimit, or none, is read here.
func (k *Keys) org(ctx context.Context, org string) (orgKeys, error) {
	now := time.Now()
	k.mu.Lock()
	o, ok := k.keys[org]
	age := now.Sub(o.readAt)
	start := ok && age >= generationTTL && age < StaleLimit && !k.refreshing[org]
	if start {
		k.refreshing[org] = true
	}
	k.mu.Unlock()
	if ok && age < StaleLimit {
		if start {
			go k.refresh(org, o)
		}
		return o, nil
	}
	if ok {
		return k.reread(ctx, org, o)
	}
	if err := k.make(ctx, org); err != nil {
		return orgKeys{}, err
	}
	return k.reread(ctx, org, orgKeys{})
}

// refresh reads org's generation again beside the request that found o stale; on an
// error the copy stays, and a later call tries again (or, past StaleLimit, fails).
// Its context is its own: the read is no request's work (nor in its trace).
func (k *Keys) refresh(org string, o orgKeys) {
	ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
	defer cancel()
	_, _ = k.reread(ctx, org, o)
	k.mu.Lock()
	delete(k.refreshing, org)
	k.mu.Unlock()
}

// reread reads org's generation and keeps o stamped as read now when it is still o's,
// else reads the keys and keeps them. o's zero value (no copy) always reads the keys.
func (k *Keys) reread(ctx context.Context, org string, o orgKeys) (orgKeys, error) {
	now := time.Now()
	if o.current.Key != nil {
		same, err := k.sameGeneration(ctx, org, o)
		if err != nil {
			return orgKeys{}, err
		}
		if same {
			o.readAt = now
			k.keep(org, o)
			return o, nil
		}
	}
	o, err := k.read(ctx, org)
	if err != nil {
		return orgKeys{}, err
	}
	o.readAt = now
	k.keep(org, o)
	return o, nil
}

// keep keeps o as org's copy unless a copy read later is kept already (a slow
// background read must not put back what a rotation replaced).
func (k *Keys) keep(org string, o orgKeys) {
	k.mu.Lock()
	if cur, ok := k.keys[org]; !ok || !cur.readAt.After(o.readAt) {
		k.keys[org] = o
	}
	k.mu.Unlock()
}

// sameGeneration reports whether org's stored generations are still o's.
func (k *Keys) sameGeneration(ctx context.Context, org string, o orgKeys) (bool, error) {
	var gen int
	var retired *int
	if err := k.pool.QueryRow(ctx, `SELECT gen, retired_gen FROM loom.user_ref_keys WHERE org = $1`, org).Scan(&gen, &retired); err != nil {
		return false, fmt.Errorf("read the generation of the user reference key of %s: %w", org, err)
	}
	if gen != o.current.Gen || (retired == nil) != (o.retired == nil) {
		return false, nil
	}
	return retired == nil || *retired == o.retired.Gen, nil
}

// make stores a fresh key for org unless it has one.
func (k *Keys) make(ctx context.Context, org string) error {
	fresh := make([]byte, events.UserRefKeySize)
	if _, err := rand.Read(fresh); err != nil {
		return fmt.Errorf("make the user reference key of %s: %w", org, err)
	}
	stored := fresh
	var err error
	if k.ring != nil {
		if stored, err = k.ring.Wrap(fresh); err != nil {
			return err
		}
	}
	// The org's name wrap key is made with it (an org made before migration 158 gets
	// one here or from the at-rest pass, whichever comes first).
	_, wrapKey, err := kek.NewKey(k.ring)
	if err != nil {
		return fmt.Errorf("make the name wrap key of %s: %w", org, err)
	}
	// Whichever process inserts first wins; every one reads the key that won (a second
	// read when the winner committed after this statement's snapshot).
	if _, err := k.pool.Exec(ctx, `WITH ref AS (INSERT INTO loom.user_ref_keys (org, key) VALUES ($1, $2) ON CONFLICT (org) DO NOTHING)
		INSERT INTO loom.name_wrap_keys (org, gen, key) VALUES ($1, 1, $3) ON CONFLICT (org) DO NOTHING`,
		org, stored, wrapKey); err != nil {
		return fmt.Errorf("make the user reference key of %s: %w", org, err)
	}
	return nil
}

// read reads and opens org's stored keys.
func (k *Keys) read(ctx context.Context, org string) (orgKeys, error) {
	var o orgKeys
	var stored, retired []byte
	var retiredGen *int
	if err := k.pool.QueryRow(ctx, `SELECT gen, key, retired_gen, retired FROM loom.user_ref_keys WHERE org = $1`, org).
		Scan(&o.current.Gen, &stored, &retiredGen, &retired); err != nil {
		return o, fmt.Errorf("read the user reference key of %s: %w", org, err)
	}
	var err error
	if o.current.Key, err = k.unwrap(stored); err != nil {
		return o, fmt.Errorf("open the user reference key of %s: %w", org, err)
	}
	if retiredGen != nil {
		r := Generation{Gen: *retiredGen}
		if r.Key, err = k.unwrap(retired); err != nil {
			return o, fmt.Errorf("open the retired user reference key of %s: %w", org, err)
		}
		o.retired = &r
	}
	return o, nil
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
