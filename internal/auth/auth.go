// Package auth turns a bearer token into the principal a request acts as. Tokens are
// stored as SHA-256 of the secret in loom.api_tokens; the token decides the org, the
// namespaces it reaches and its read scope, so no request can name another org.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/ttlcache"
	"github.com/loomplane/loom/internal/userref"
)

// Roles of an org's tokens, from most to least able, and the deployment operator's.
// An operator token belongs to no org: it reaches no memory, only the controls that
// act on the whole deployment (a projection's reset, health's details).
const (
	RoleAdmin    = "admin"
	RoleWriter   = "writer"
	RoleReader   = "reader"
	RoleOperator = "operator"
)

// Principal is who a request acts as.
type Principal struct {
	TokenID    string
	Org        string // "" for an operator
	Role       string
	Namespaces []string // nil: every namespace of the org
	ReadUserID string   // "": every user's rows; else only this user's
	// ReadSessionID is the own_session scope: "" every session's rows; else only this
	// session's.
	ReadSessionID string
	Name          string
	// ReadUserRef is the read user's reference as the token's row keeps it (migration
	// 156). It outlives the user's erasure, after which ReadUserID is ErasedUser, so
	// what was the token's own user's (its erasure) is still told apart.
	ReadUserRef string
}

// Actor is what the server stamps as a revision's actor.
func (p Principal) Actor() string { return "token:" + p.TokenID }

// Operator reports whether the token is the deployment operator's.
func (p Principal) Operator() bool { return p.Role == RoleOperator }

// CanWrite reports whether the token may change memory.
func (p Principal) CanWrite() bool { return p.Role == RoleAdmin || p.Role == RoleWriter }

// Reaches reports whether the token may touch namespace ns.
func (p Principal) Reaches(ns string) bool {
	if p.Namespaces == nil {
		return true
	}
	for _, n := range p.Namespaces {
		if n == ns {
			return true
		}
	}
	return false
}

// ErrUnauthenticated is a missing, malformed, unknown or revoked token.
var ErrUnauthenticated = errors.New("auth: unauthenticated")

// Store creates and checks tokens.
type Store struct {
	pool     *pgxpool.Pool
	refs     *userref.Keys // makes an org's user reference key for a token bound to a user
	ring     *kek.Ring     // wraps the key a token bound to a session alone seals it under; nil: stored raw
	cacheTTL time.Duration
	cache    *ttlcache.Cache[string, cachedToken]
	// purges counts the cache's purges (a revocation, an erasure, a lost LISTEN
	// connection). A lookup stamps its entry with the count it saw before its read; an
	// entry stamped before the latest purge is never answered, so a lookup that read
	// the row before a revocation committed and adds after the purge caches nothing
	// any later request sees.
	purges atomic.Uint64
	// revocations is FollowRevocations' listener, nil while none runs. While it runs and
	// its LISTEN does not hold, a revocation committed elsewhere reaches no one here, so
	// the cache neither answers nor keeps a token: each request reads its row.
	revocations atomic.Pointer[pg.Listener]
	deadline    time.Duration
	// afterRead, set by a test only, runs between a lookup's read and its cache add.
	afterRead func()
	// holdOffListens, set by a test only, is handed to FollowRevocations' listener
	// (pg.Listener.HoldOffListens).
	holdOffListens func(context.Context) error
}

// cachedToken is a token this process checked, with the expiry it was created with
// and the purge count its lookup saw before reading the row.
type cachedToken struct {
	p         Principal
	expiresAt *time.Time
	purges    uint64
}

// DefaultCacheTTL bounds how long a revoked token keeps working on a process that saw
// it when the revocation's notification does not reach it (LOOM_AUTH_TOKEN_CACHE_MS).
const DefaultCacheTTL = 10 * time.Second

// StoreOption changes how NewStore builds a token store.
type StoreOption func(*Store)

// WithCacheTTL bounds how long a checked token is answered from memory.
func WithCacheTTL(d time.Duration) StoreOption { return func(s *Store) { s.cacheTTL = d } }

// WithLookupDeadline bounds how long a token not in the cache waits for Postgres
// (LOOM_PG_READ_DEADLINE_MS); then the request answers a retryable 503.
func WithLookupDeadline(d time.Duration) StoreOption { return func(s *Store) { s.deadline = d } }

// WithUserRefs is where a token bound to a user finds its org's user reference key
// (its read_user_id holds the user's reference: migration 156); the default keeps a
// key it makes unwrapped, as before LOOM_KEK.
func WithUserRefs(k *userref.Keys) StoreOption { return func(s *Store) { s.refs = k } }

// WithKEK wraps the key of a token's own that a token bound to a session and no user
// seals its session under (migration 179); without it the key is stored raw, as before
// LOOM_KEK, until the at-rest pass wraps it.
func WithKEK(r *kek.Ring) StoreOption { return func(s *Store) { s.ring = r } }

// ErasedUser is the read user of a token bound to a user since erased: the token's
// column keeps the user's reference, whose name the erasure deleted. No user id
// equals it (an id holds no control character), so the token reaches no one's rows.
const ErasedUser = "\x7f(an erased user)"

// tokenUserSQL opens a token's read user from its org and reference.
const tokenUserSQL = `CASE WHEN coalesce(read_user_id, '') IN ('', '-') THEN read_user_id
	ELSE coalesce(nullif(loom.user_name(org, read_user_id), ''), '` + ErasedUser + `') END`

// ErasedSession is the read session of a session-bound token whose session no key
// opens any more: the token was bound to a user too, whose erasure deleted the key the
// session was sealed under (migration 179). No session id equals it, so the token
// reaches no session's rows.
const ErasedSession = "\x7f(an erased session)"

// tokenSessionSQL opens a token's read session (NULL for a token bound to none).
const tokenSessionSQL = `CASE WHEN read_session IS NULL THEN NULL
	ELSE coalesce(nullif(loom.token_session(org, read_user_id, read_session, read_session_key), ''), '` + ErasedSession + `') END`

// DefaultLookupDeadline is the lookup's bound when none is given.
const DefaultLookupDeadline = 5 * time.Second

// NewStore returns a token store over the pool.
func NewStore(pool *pgxpool.Pool, opts ...StoreOption) *Store {
	s := &Store{pool: pool, cacheTTL: DefaultCacheTTL, deadline: DefaultLookupDeadline}
	for _, o := range opts {
		o(s)
	}
	if s.refs == nil {
		s.refs = userref.New(pool, nil)
	}
	s.cache = ttlcache.New[string, cachedToken](10000, s.cacheTTL)
	return s
}

// CacheTTL is the bound within which every process refuses a revoked token.
func (s *Store) CacheTTL() time.Duration { return s.cacheTTL }

// NewToken describes a token to create: an org's, or (Role RoleOperator, no org,
// namespace or read user) the deployment operator's.
type NewToken struct {
	Org        string
	Role       string
	Name       string
	Namespaces []string
	ReadUserID string
	// ReadSessionID binds the token to one session (own_session).
	ReadSessionID string
	// ExpiresAt, when set, ends the token: from then on it is refused as revoked.
	ExpiresAt *time.Time
}

// MaxNamespaces bounds the namespaces a token names: a wider token names none, which
// reaches every namespace of its org.
const MaxNamespaces = 100

// MaxLifetime bounds how far ahead a token's expiry may lie: a token that should not
// end is created without one.
const MaxLifetime = 10 * 365 * 24 * time.Hour

// Distinct is namespaces without repeats, in their first order (nil stays nil).
func Distinct(namespaces []string) []string {
	if namespaces == nil {
		return nil
	}
	seen := make(map[string]bool, len(namespaces))
	out := make([]string, 0, len(namespaces))
	for _, ns := range namespaces {
		if !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	return out
}

// Create stores a new token and returns its secret, which is shown once and never stored.
func (s *Store) Create(ctx context.Context, t NewToken) (secret string, p Principal, err error) {
	switch t.Role {
	case RoleAdmin, RoleWriter, RoleReader:
		if err := memrow.ValidateName("org", t.Org); err != nil {
			return "", p, err
		}
	case RoleOperator:
		if t.Org != "" || t.Namespaces != nil || t.ReadUserID != "" || t.ReadSessionID != "" {
			return "", p, errors.New("an operator token belongs to no org: it takes no org, namespace or read user")
		}
	default:
		return "", p, fmt.Errorf("role %q: want admin, writer, reader or operator", t.Role)
	}
	for _, ns := range t.Namespaces {
		if err := memrow.ValidateName("namespace", ns); err != nil {
			return "", p, err
		}
	}
	if t.ReadSessionID != "" {
		if err := memrow.ValidateIdentity("read_session_id", t.ReadSessionID); err != nil {
			return "", p, err
		}
	}
	t.Namespaces = Distinct(t.Namespaces)
	if len(t.Namespaces) > MaxNamespaces {
		return "", p, fmt.Errorf("a token names at most %d namespaces (leave them out for all of them)", MaxNamespaces)
	}
	if t.ExpiresAt != nil && !t.ExpiresAt.After(time.Now()) {
		return "", p, fmt.Errorf("%w: the expiry must lie in the future", ErrInvalidToken)
	}
	return s.insert(ctx, t)
}

// newSecret makes a token's id and secret and the secret's SHA-256, which is stored.
func newSecret() (id, secret string, sum [32]byte, err error) {
	idBytes := make([]byte, 6)
	secretBytes := make([]byte, 32)
	if _, err := rand.Read(idBytes); err != nil {
		return "", "", sum, err
	}
	if _, err := rand.Read(secretBytes); err != nil {
		return "", "", sum, err
	}
	id = hex.EncodeToString(idBytes)
	secret = "loom_" + id + "_" + base64.RawURLEncoding.EncodeToString(secretBytes)
	return id, secret, sha256.Sum256([]byte(secret)), nil
}

// insert stores a token described by t (checked) and returns its secret. The user is
// stored by reference and the session sealed (loom.token_binding, migration 179):
// under the user's name key, or under a key of the token's own for a token bound to a
// session and no user.
func (s *Store) insert(ctx context.Context, t NewToken) (secret string, p Principal, err error) {
	id, secret, sum, err := newSecret()
	if err != nil {
		return "", p, err
	}
	var readUser, readSession *string
	var sessionKey []byte
	if t.ReadUserID != "" {
		readUser = &t.ReadUserID
		// The column names the user by reference (loom.named_user): the org's key first.
		if _, err := s.refs.Key(ctx, t.Org); err != nil {
			return "", p, fmt.Errorf("store token: %w", err)
		}
	}
	if t.ReadSessionID != "" {
		readSession = &t.ReadSessionID
		if t.ReadUserID == "" || t.ReadUserID == "-" {
			if _, sessionKey, err = kek.NewKey(s.ring); err != nil {
				return "", p, fmt.Errorf("store token: %w", err)
			}
		}
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO loom.api_tokens (token_id, token_sha256, org, role, namespaces, read_user_id, name, expires_at,
			read_session, read_session_key)
		SELECT $1, $2, $3, $4, $5, b.user_ref, $7, $8, b.session, $10 FROM loom.token_binding($3, $6, $9, $10) b`,
		id, sum[:], t.Org, t.Role, t.Namespaces, readUser, t.Name, t.ExpiresAt, readSession, sessionKey)
	if err != nil {
		return "", p, fmt.Errorf("store token: %w", err)
	}
	return secret, Principal{TokenID: id, Org: t.Org, Role: t.Role, Namespaces: t.Namespaces, ReadUserID: t.ReadUserID,
		ReadSessionID: t.ReadSessionID, Name: t.Name}, nil
}

// Authenticate resolves a secret to its principal.
func (s *Store) Authenticate(ctx context.Context, secret string) (Principal, error) {
	if !strings.HasPrefix(secret, "loom_") || len(secret) > 200 {
		return Principal{}, ErrUnauthenticated
	}
	sum := sha256.Sum256([]byte(secret))
	key := string(sum[:])
	purges := s.purges.Load()
	heard := s.hearsRevocations()
	if c, ok := s.cache.Get(key); ok && heard && c.purges == purges {
		if c.expiresAt == nil || time.Now().Before(*c.expiresAt) {
			return c.p, nil
		}
		s.cache.Remove(key)
		return Principal{}, ErrUnauthenticated
	}
	ctx, cancel := context.WithTimeout(ctx, s.deadline)
	defer cancel()
	var p Principal
	var readUser, readSession *string
	var expiresAt *time.Time
	err := s.pool.QueryRow(ctx, `SELECT token_id, org, role, namespaces, `+tokenUserSQL+`, name, expires_at, `+tokenSessionSQL+`,
			coalesce(read_user_id, '')
		FROM loom.api_tokens WHERE token_sha256 = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`, sum[:]).
		Scan(&p.TokenID, &p.Org, &p.Role, &p.Namespaces, &readUser, &p.Name, &expiresAt, &readSession, &p.ReadUserRef)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("look up token: %w", err)
	}
	if readUser != nil {
		p.ReadUserID = *readUser
	}
	if readSession != nil {
		p.ReadSessionID = *readSession
	}
	if s.afterRead != nil {
		s.afterRead()
	}
	// A purge since purges was read may have followed a commit this read preceded:
	// this request is answered as read, and the stale stamp keeps it from the next.
	if heard {
		s.cache.Add(key, cachedToken{p: p, expiresAt: expiresAt, purges: purges})
	}
	return p, nil
}

// hearsRevocations reports whether a revocation committed from now on empties this
// process's cache at once: no follower runs (the cache TTL is the only bound, as
// documented), or the follower's LISTEN holds. A LISTEN lost after this answer is
// a purge, which the lookup's stamp already covers.
func (s *Store) hearsRevocations() bool {
	l := s.revocations.Load()
	return l == nil || l.Holding()
}

const localsKey = "loom.principal"

// Middleware authenticates every request to an org's memory it guards: no token or a
// wrong one is 401, an operator token 403 (it reaches no org).
func (s *Store) Middleware() fiber.Handler {
	return s.guard(func(p Principal) error {
		if p.Operator() {
			return httperr.New(http.StatusForbidden, httperr.CodePermissionDenied,
				"an operator token acts on the deployment, not on an org's memory: use an org's token")
		}
		return nil
	})
}

// OperatorMiddleware authenticates the deployment-wide controls: only an operator
// token passes (`loomd token create --operator`); an org's token, even an admin's, is 403.
func (s *Store) OperatorMiddleware() fiber.Handler {
	return s.guard(func(p Principal) error {
		if !p.Operator() {
			return httperr.New(http.StatusForbidden, httperr.CodePermissionDenied,
				"this control acts on the whole deployment: it needs an operator token (loomd token create --operator), which no org token is")
		}
		return nil
	})
}

func (s *Store) guard(allow func(Principal) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		secret, ok := Bearer(c.Get(fiber.HeaderAuthorization))
		if !ok {
			return unauthenticated("missing bearer token: send Authorization: Bearer <token>")
		}
		p, err := s.Authenticate(c.UserContext(), secret)
		if errors.Is(err, ErrUnauthenticated) {
			return unauthenticated("unknown or revoked token")
		}
		if err != nil {
			return httperr.Store("checking the token", err)
		}
		if err := allow(p); err != nil {
			return err
		}
		c.Locals(localsKey, p)
		return c.Next()
	}
}

// Optional is the principal of a request that may carry a token (the health routes):
// ok is false without an Authorization header, err is a token that is wrong (401) or
// could not be checked.
func (s *Store) Optional(c *fiber.Ctx) (p Principal, ok bool, err error) {
	h := c.Get(fiber.HeaderAuthorization)
	if h == "" {
		return p, false, nil
	}
	secret, ok := Bearer(h)
	if !ok {
		return p, false, unauthenticated("malformed Authorization header: send Authorization: Bearer <token>")
	}
	p, err = s.Authenticate(c.UserContext(), secret)
	if errors.Is(err, ErrUnauthenticated) {
		return p, false, unauthenticated("unknown or revoked token")
	}
	if err != nil {
		return p, false, httperr.Store("checking the token", err)
	}
	return p, true, nil
}

// Bearer reads the token of an Authorization header. The scheme is matched without
// regard to case (RFC 7235: "bearer" is "Bearer").
func Bearer(header string) (string, bool) {
	scheme, secret, found := strings.Cut(strings.TrimSpace(header), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	secret = strings.TrimSpace(secret)
	return secret, secret != ""
}

func unauthenticated(msg string) error {
	return httperr.New(http.StatusUnauthorized, httperr.CodeUnauthenticated, msg)
}

// From returns the request's principal; routes behind Middleware always have one.
func From(c *fiber.Ctx) Principal {
	p, _ := c.Locals(localsKey).(Principal)
	return p
}

// Namespace checks that the principal reaches ns. A namespace the token cannot reach
// answers 404, as if it held nothing: a token learns nothing of what it cannot read.
func (p Principal) Namespace(ns string) error {
	if err := memrow.ValidateName("namespace", ns); err != nil {
		return err
	}
	if !p.Reaches(ns) {
		return httperr.NotFound("namespace not found")
	}
	return nil
}

// RequireWrite is 403 for a read-only token.
func (p Principal) RequireWrite() error {
	if !p.CanWrite() {
		return httperr.New(http.StatusForbidden, httperr.CodePermissionDenied, "this token may only read")
	}
	return nil
}

// RequireAdmin is 403 for a token that is not an admin's, naming what needs one.
func (p Principal) RequireAdmin(what string) error {
	if p.Role != RoleAdmin {
		return httperr.New(http.StatusForbidden, httperr.CodePermissionDenied, what+" needs an admin token")
	}
	return nil
}

// A token bound to one user (ReadUserID) acts on that user's rows alone, whatever its
// role: it reads, writes and erases them and no other user's. What necessarily acts
// on every user's rows of a namespace (its policy, a blacklist and its sweep, a
// restore, a rollback, a snapshot, a namespace's erasure) is refused to it.

// ActsOn reports whether the token may read or change userID's rows.
func (p Principal) ActsOn(userID string) bool { return p.ReadUserID == "" || p.ReadUserID == userID }

// InSession reports whether the token may read or change sessionID's rows: a token
// bound to one session (own_session) reaches that session's alone.
func (p Principal) InSession(sessionID string) bool {
	return p.ReadSessionID == "" || p.ReadSessionID == sessionID
}

// Sees reports whether the token may read or change a row of userID and sessionID.
func (p Principal) Sees(userID, sessionID string) bool {
	return p.ActsOn(userID) && p.InSession(sessionID)
}

// RequireUser is 403 for a token bound to a user other than userID, naming what it
// tried, and for a token bound to one session (a user's rows span sessions).
func (p Principal) RequireUser(userID, what string) error {
	if p.ReadSessionID != "" {
		return httperr.New(http.StatusForbidden, httperr.CodePermissionDenied,
			what+": this token acts on one session's memories, not on every session of "+userID)
	}
	if !p.ActsOn(userID) {
		return httperr.New(http.StatusForbidden, httperr.CodePermissionDenied,
			what+": this token acts on one user's memories, not on "+userID+"'s")
	}
	return nil
}

// RequireEveryUser is 403 for a token bound to one user, naming what acts on every
// user's memories.
func (p Principal) RequireEveryUser(what string) error {
	if p.ReadUserID != "" || p.ReadSessionID != "" {
		return httperr.New(http.StatusForbidden, httperr.CodePermissionDenied,
			what+" acts on every user's memories; this token acts on one user's")
	}
	return nil
}
