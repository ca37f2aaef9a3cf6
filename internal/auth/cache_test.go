package auth_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/pgtest"
)

// pausedLookup runs one Authenticate of secret on store held between its read of the
// token's row and its cache add: it returns once the read is done, and release lets
// the lookup finish and waits for it. Later lookups are not held.
func pausedLookup(t *testing.T, store *auth.Store, secret string) (release func()) {
	t.Helper()
	read, resume, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	auth.PauseAfterRead(store, func() {
		if held.CompareAndSwap(false, true) {
			close(read)
			<-resume
		}
	})
	go func() {
		defer close(done)
		// The held lookup read the row before the change: it may answer as read.
		_, _ = store.Authenticate(context.Background(), secret)
	}()
	select {
	case <-read:
	case <-time.After(30 * time.Second):
		t.Fatal("the lookup never read the token's row")
	}
	return func() {
		close(resume)
		<-done
	}
}

// followingStore is a process's token store with an hour's cache, following the
// revocations' channel until the test ends; it returns once its LISTEN holds.
func followingStore(t *testing.T, pool *pgxpool.Pool) *auth.Store {
	t.Helper()
	store := auth.NewStore(pool, auth.WithCacheTTL(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go store.FollowRevocations(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
	waitPurges(t, store, 1)
	return store
}

// waitPurges waits until store's token cache was emptied at least n times.
func waitPurges(t *testing.T, store *auth.Store, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); auth.Purges(store) < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the token cache was emptied %d times, want %d", auth.Purges(store), n)
		}
	}
}

// A lookup that read a token's row just before a revocation or an erasure committed,
// and adds it to the cache just after the purge that change caused, must not leave the
// old principal cached: the next request reads the row again. On main it was answered
// from the cache for the whole TTL (an hour here).
func TestALookupInFlightCachesNothingAcrossAPurge(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		token auth.NewToken
		// change commits the revocation or erasure; here is the held lookup's process,
		// other another one. It returns once here's cache was purged for it.
		change func(t *testing.T, pool *pgxpool.Pool, here, other *auth.Store, id string)
		// after checks the next Authenticate on here.
		after func(t *testing.T, p auth.Principal, err error)
	}{
		{
			name:  "revoked by this process",
			token: auth.NewToken{Org: "acme", Role: auth.RoleWriter},
			change: func(t *testing.T, _ *pgxpool.Pool, here, _ *auth.Store, id string) {
				if _, err := here.Revoke(ctx, "acme", id); err != nil {
					t.Fatal(err)
				}
			},
			after: refused,
		},
		{
			name:  "revoked by another process",
			token: auth.NewToken{Org: "acme", Role: auth.RoleWriter},
			change: func(t *testing.T, _ *pgxpool.Pool, here, other *auth.Store, id string) {
				n := auth.Purges(here)
				if _, err := other.Revoke(ctx, "acme", id); err != nil {
					t.Fatal(err)
				}
				waitPurges(t, here, n+1)
			},
			after: refused,
		},
		{
			name:  "its user erased by another process",
			token: auth.NewToken{Org: "acme", Role: auth.RoleWriter, ReadUserID: "alice"},
			change: func(t *testing.T, pool *pgxpool.Pool, here, _ *auth.Store, _ string) {
				n := auth.Purges(here)
				eraseUserName(t, pool, "acme", "alice")
				waitPurges(t, here, n+1)
			},
			after: func(t *testing.T, p auth.Principal, err error) {
				if err != nil || p.ReadUserID != auth.ErasedUser {
					t.Errorf("after the erasure the token authenticates as user %q (err %v), want the erased user", p.ReadUserID, err)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool := pgtest.Migrated(t, postgres, "acme")
			here, other := followingStore(t, pool), auth.NewStore(pool)
			secret, p, err := other.Create(ctx, c.token)
			if err != nil {
				t.Fatal(err)
			}
			release := pausedLookup(t, here, secret)
			c.change(t, pool, here, other, p.TokenID)
			release()
			got, err := here.Authenticate(ctx, secret)
			c.after(t, got, err)
		})
	}
}

// A process whose LISTEN was not holding when a token was revoked (at its start, or
// while its connection was down) empties its cache once the LISTEN takes hold: on main
// it answered the cached token until the TTL.
func TestAListenTakingHoldForgetsWhatWasRevokedUnheard(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Migrated(t, postgres, "acme")
	here, other := auth.NewStore(pool, auth.WithCacheTTL(time.Hour)), auth.NewStore(pool)
	secret, p, err := other.Create(ctx, auth.NewToken{Org: "acme", Role: auth.RoleWriter})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := here.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Revoke(ctx, "acme", p.TokenID); err != nil { // notified to no one listening
		t.Fatal(err)
	}
	listen, cancel := context.WithCancel(ctx)
	defer cancel()
	go here.FollowRevocations(listen, slog.New(slog.NewTextHandler(io.Discard, nil)))
	// The LISTEN takes hold within milliseconds; the cache holds the token for an hour.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := here.Authenticate(ctx, secret)
		if errors.Is(err, auth.ErrUnauthenticated) {
			return
		}
		if time.Now().After(deadline) {
			refused(t, got, err)
			return
		}
	}
}

func TestATokenCheckedWhileTheListenIsDownIsReadAgain(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Migrated(t, postgres, "acme")
	here, other := auth.NewStore(pool, auth.WithCacheTTL(time.Hour)), auth.NewStore(pool)
	var down atomic.Bool
	down.Store(true)
	auth.HoldOffListens(here, func(context.Context) error {
		if down.Load() {
			return errors.New("held off by the test")
		}
		return nil
	})
	listen, cancel := context.WithCancel(ctx)
	defer cancel()
	go here.FollowRevocations(listen, slog.New(slog.NewTextHandler(io.Discard, nil)))
	secret, p, err := other.Create(ctx, auth.NewToken{Org: "acme", Role: auth.RoleWriter})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := here.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Revoke(ctx, "acme", p.TokenID); err != nil { // its notification reaches no one here
		t.Fatal(err)
	}
	got, err := here.Authenticate(ctx, secret)
	refused(t, got, err)

	// Once the LISTEN holds, the cache serves again.
	down.Store(false)
	secret, _, err = other.Create(ctx, auth.NewToken{Org: "acme", Role: auth.RoleWriter})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		before := auth.Purges(here)
		if _, err := here.Authenticate(ctx, secret); err != nil {
			t.Fatal(err)
		}
		if auth.Cached(here, secret) && auth.Purges(here) == before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache kept nothing after the LISTEN took hold")
		}
	}
}

func refused(t *testing.T, p auth.Principal, err error) {
	t.Helper()
	if !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("the revoked token still authenticates as %+v (err %v)", p, err)
	}
}

// eraseUserName deletes a user's name as the erasure's Postgres step does, notifying
// the revocations' channel in the same transaction.
func eraseUserName(t *testing.T, pool *pgxpool.Pool, org, user string) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM loom.user_names WHERE org = $1 AND user_ref = loom.user_ref($1, $2)`, org, user)
	auth.QueueForgetCached(b, "erasure of "+user)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
