package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/pg"
)

// A token's lifecycle: listed without its secret, revoked, rotated into a new secret
// with the same reach. A revocation is honoured by every process: the revoking
// transaction NOTIFYs RevocationChannel, every process's FollowRevocations empties its
// cache on it (and on each LISTEN that takes hold, so one missed while no LISTEN held
// is made up for then), and a process the notification misses stops answering the
// token from its cache within CacheTTL. A lookup in flight across the purge caches
// nothing a later request sees (Store.purges).

// RevocationChannel is the NOTIFY channel a revocation or a rotation signals on.
const RevocationChannel = "loom_token_revoked"

var (
	// ErrInvalidToken is a token description the store refuses (an expiry in the past).
	ErrInvalidToken = errors.New("auth: invalid token")
	// ErrTokenNotFound is a token id the org does not hold (or, for a rotation, one
	// that is revoked or expired).
	ErrTokenNotFound = errors.New("auth: token not found")
)

// TokenInfo is what is known of a token; never its secret.
type TokenInfo struct {
	TokenID    string   `json:"token_id"`
	Org        string   `json:"org"`
	Role       string   `json:"role"`
	Name       string   `json:"name"`
	Namespaces []string `json:"namespaces"`
	ReadUserID string   `json:"read_user_id,omitempty"`
	// ReadSessionID is the own_session scope: the one session the token reaches.
	ReadSessionID string     `json:"read_session_id,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	ReplacedBy    string     `json:"replaced_by,omitempty"`
}

const tokenColumns = `token_id, org, role, name, namespaces, coalesce(` + tokenUserSQL + `, ''), created_at, expires_at, revoked_at, coalesce(replaced_by, ''), coalesce(` + tokenSessionSQL + `, '')`

func scanToken(r pgx.Row) (TokenInfo, error) {
	var t TokenInfo
	err := r.Scan(&t.TokenID, &t.Org, &t.Role, &t.Name, &t.Namespaces, &t.ReadUserID, &t.CreatedAt, &t.ExpiresAt, &t.RevokedAt, &t.ReplacedBy, &t.ReadSessionID)
	return t, err
}

// List returns the tokens of org ("" for every org), newest first.
func (s *Store) List(ctx context.Context, org string) ([]TokenInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM loom.api_tokens
		WHERE $1 = '' OR org = $1 ORDER BY created_at DESC, token_id`, org)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TokenInfo, error) { return scanToken(r) })
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// Revoke ends a token of org ("" for any org) at once. Revoking a revoked token
// changes nothing and answers it as it is.
func (s *Store) Revoke(ctx context.Context, org, id string) (TokenInfo, error) {
	var t TokenInfo
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		t, err = scanToken(tx.QueryRow(ctx, `UPDATE loom.api_tokens SET revoked_at = coalesce(revoked_at, now())
			WHERE token_id = $1 AND ($2 = '' OR org = $2) RETURNING `+tokenColumns, id, org))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrTokenNotFound
		}
		if err != nil {
			return fmt.Errorf("revoke the token: %w", err)
		}
		return notifyRevoked(ctx, tx, id)
	})
	if err == nil {
		s.purge()
	}
	return t, err
}

// Rotate replaces a live token of org ("" for any org) with a new secret of the same
// reach, and revokes the old one in the same transaction. The new token keeps the
// old one's expiry unless expiresAt sets another. Its binding is the old row's as
// stored (the user's reference, the sealed session and its key), so the new token
// reaches what the old one did: after its user's erasure, no session.
func (s *Store) Rotate(ctx context.Context, org, id string, expiresAt *time.Time) (secret string, info TokenInfo, err error) {
	if expiresAt != nil && !expiresAt.After(time.Now()) {
		return "", info, fmt.Errorf("%w: the expiry must lie in the future", ErrInvalidToken)
	}
	err = pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		old, err := scanToken(tx.QueryRow(ctx, `SELECT `+tokenColumns+` FROM loom.api_tokens
			WHERE token_id = $1 AND ($2 = '' OR org = $2) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
			FOR UPDATE`, id, org))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrTokenNotFound
		}
		if err != nil {
			return fmt.Errorf("read the token: %w", err)
		}
		if expiresAt == nil {
			expiresAt = old.ExpiresAt
		}
		newID, fresh, sum, err := newSecret()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO loom.api_tokens (token_id, token_sha256, org, role, namespaces, read_user_id, name, expires_at,
				read_session, read_session_key)
			SELECT $1, $2, org, role, namespaces, read_user_id, name, $4, read_session, read_session_key FROM loom.api_tokens WHERE token_id = $3`,
			newID, sum[:], id, expiresAt); err != nil {
			return fmt.Errorf("store the rotated token: %w", err)
		}
		secret = fresh
		if _, err := tx.Exec(ctx, `UPDATE loom.api_tokens SET revoked_at = now(), replaced_by = $2 WHERE token_id = $1`, id, newID); err != nil {
			return fmt.Errorf("revoke the rotated token: %w", err)
		}
		if info, err = scanToken(tx.QueryRow(ctx, `SELECT `+tokenColumns+` FROM loom.api_tokens WHERE token_id = $1`, newID)); err != nil {
			return fmt.Errorf("read the new token: %w", err)
		}
		return notifyRevoked(ctx, tx, id)
	})
	if err != nil {
		return "", TokenInfo{}, err
	}
	s.purge()
	return secret, info, nil
}

// notifySQL signals RevocationChannel; its payload (a token id, an erasure's) is for
// whoever reads the channel by hand: every process empties its whole cache.
const notifySQL = `SELECT pg_notify('` + RevocationChannel + `', $1)`

func notifyRevoked(ctx context.Context, tx pgx.Tx, id string) error {
	if _, err := tx.Exec(ctx, notifySQL, id); err != nil {
		return fmt.Errorf("notify the revocation: %w", err)
	}
	return nil
}

// QueueForgetCached queues, in a transaction that changes what stored tokens open to
// without touching their rows (an erasure deleting a user's name: the tokens bound to
// the user authenticate as ErasedUser from then on), the notification on which every
// process's FollowRevocations empties its cache once the transaction commits. why is
// the payload. The committing process empties its own with ForgetCached.
func QueueForgetCached(b *pgx.Batch, why string) { b.Queue(notifySQL, why) }

// ForgetCached empties this process's token cache: every token is checked again at
// its next request.
func (s *Store) ForgetCached() { s.purge() }

// purge empties the cache and counts the purge first, so an entry a lookup in flight
// adds afterwards carries an older count and is never answered (Store.purges).
func (s *Store) purge() {
	s.purges.Add(1)
	s.cache.Purge()
}

// FollowRevocations empties this process's token cache on every revocation any
// process commits, until ctx ends. A lost LISTEN connection empties it too, and so
// does each LISTEN that takes hold (the first and every reconnection): what was
// revoked before it, unnotified, is read again on the next request.
//
// Until its LISTEN first takes hold, and from each loss until it holds again, the
// cache is out of use (Store.revocations): a token checked then is read again at its
// next request.
func (s *Store) FollowRevocations(ctx context.Context, log *slog.Logger) {
	l := pg.NewListener(s.pool, RevocationChannel, log)
	if s.holdOffListens != nil {
		l.HoldOffListens(s.holdOffListens)
	}
	s.revocations.Store(l)
	wake := l.C() // before Run, so no wake of its first LISTEN is missed
	go l.Run(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
			wake = l.C()
			s.purge()
		}
	}
}
