// Package profiles holds the rules of structured profiles that the write side, the
// read side and the structured_profile pass share: where a user's profile lives (a
// memory row of type profile at key profile:<user>), the digest of the facts it was
// built from, the tags that record it, the namespace's schema (loom.profile_schemas,
// whose statements are all here), and the rendering of a profile as prompt text.
package profiles

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// WorkerActor is the actor of every profile the pass writes. No token maps to a
// worker: actor, so a caller who writes the profile key with memory.set cannot forge a
// served profile or mark a user current: readers trust a profile row only with it.
const WorkerActor = "worker:structured_profile"

// MemoryType is the profile's row type: not searchable, so no search leg serves it.
const MemoryType = "profile"

// KeyPrefix starts every profile's key.
const KeyPrefix = "profile:"

// MaxSources is how many of a user's facts a profile is built from at most (the
// newest); the digest covers the same ones.
const MaxSources = 200

// MaxSchemaBytes bounds a namespace's profile schema.
const MaxSchemaBytes = 32 << 10

// Identity is the key of a user's profile in a namespace.
func Identity(org, namespace, userID string) memrow.Identity {
	return memrow.Identity{Org: org, Namespace: namespace, Agent: memrow.DefaultIdentity, UserID: userID,
		SessionID: memrow.DefaultIdentity, MemoryKey: KeyPrefix + userID}
}

// Tags a profile row carries: the schema's hash, the digest of its sources and their
// count.
const (
	tagSchema  = "profile_schema:"
	tagDigest  = "profile_digest:"
	tagSources = "profile_sources:"
)

// Stamp is what a profile records of how it was built.
type Stamp struct {
	SchemaHash string
	Digest     string
	Sources    int
}

// Tags are the stamp as a row's tags.
func (s Stamp) Tags() []string {
	return []string{tagSchema + s.SchemaHash, tagDigest + s.Digest, tagSources + strconv.Itoa(s.Sources)}
}

// StampOf reads a profile row's stamp from its tags.
func StampOf(r *memrow.Row) Stamp {
	var s Stamp
	for _, t := range r.Tags {
		switch {
		case strings.HasPrefix(t, tagSchema):
			s.SchemaHash = strings.TrimPrefix(t, tagSchema)
		case strings.HasPrefix(t, tagDigest):
			s.Digest = strings.TrimPrefix(t, tagDigest)
		case strings.HasPrefix(t, tagSources):
			s.Sources, _ = strconv.Atoi(strings.TrimPrefix(t, tagSources))
		}
	}
	return s
}

// Trusted reports whether a head is a profile the pass wrote, live: a row someone
// else wrote at the key is no profile.
func Trusted(r *memrow.Row, now time.Time) bool {
	return r != nil && r.Actor == WorkerActor && r.MemoryType == MemoryType && r.Live(now) && !r.Redacted
}

// Source reports whether a head is one of the facts a user's profile is built from:
// a live accepted fact of another type than profile, not high and not redacted (rows
// that go to a model keep to what search may serve).
func Source(r *memrow.Row, now time.Time) bool {
	return r.Established(now) && r.MemoryType != MemoryType && r.Sensitivity != memrow.SensitivityHigh && !r.Redacted
}

// Facts reads a user's source facts in a namespace, newest first, at most MaxSources.
func Facts(ctx context.Context, q heads.Querier, org, namespace, userID string, now time.Time) ([]*memrow.Row, error) {
	rows, err := heads.OfUser(ctx, q, org, namespace, userID, 4*MaxSources, `NOT (row->>'tombstone')::boolean AND row->>'memory_type' <> 'profile'`)
	if err != nil {
		return nil, fmt.Errorf("read the user's facts: %w", err)
	}
	return newestSources(rows, now), nil
}

// Digest is the digest of a profile's sources: the XOR of a hash of each one's id,
// content hash, confidence and valid_at (else updated_at), so its size is fixed and
// the order the facts are read in does not matter. An edit, a deletion, an expiry or a
// new fact changes it; a read does not.
func Digest(facts []*memrow.Row) string {
	var acc [sha256.Size]byte
	for _, f := range facts {
		at := f.UpdatedAt
		if f.ValidAt != nil {
			at = *f.ValidAt
		}
		var conf [8]byte
		binary.BigEndian.PutUint64(conf[:], math.Float64bits(f.Confidence))
		h := sha256.Sum256([]byte(f.MemoryID + "\x00" + f.ContentSHA256 + "\x00" + string(conf[:]) + "\x00" + at.UTC().Format(time.RFC3339Nano)))
		for i := range acc {
			acc[i] ^= h[i]
		}
	}
	return hex.EncodeToString(acc[:])
}

// Schema is a namespace's profile schema.
type Schema struct {
	Doc       map[string]any
	Hash      string
	UpdatedBy string
	UpdatedAt time.Time
}

// HashOf is a schema's hash: sha256 of its canonical JSON.
func HashOf(canonical []byte) string {
	h := sha256.Sum256(canonical)
	return hex.EncodeToString(h[:])
}

// ReadSchema reads a namespace's profile schema, nil when it has none.
func ReadSchema(ctx context.Context, q heads.Querier, org, namespace string) (*Schema, error) {
	var raw []byte
	s := &Schema{}
	err := q.QueryRow(ctx, `SELECT schema, schema_hash, updated_by, updated_at FROM loom.profile_schemas WHERE org = $1 AND namespace = $2`,
		org, namespace).Scan(&raw, &s.Hash, &s.UpdatedBy, &s.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the profile schema: %w", err)
	}
	if err := json.Unmarshal(raw, &s.Doc); err != nil {
		return nil, fmt.Errorf("read the profile schema: %w", err)
	}
	return s, nil
}

// Execer is what WriteSchema needs of a pool or a transaction.
type Execer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// WriteSchema stores a namespace's profile schema (canonical JSON), replacing the one
// it had, and returns when it was stored.
func WriteSchema(ctx context.Context, q Execer, org, namespace string, canonical []byte, hash, by string) (time.Time, error) {
	var at time.Time
	err := q.QueryRow(ctx, `INSERT INTO loom.profile_schemas (org, namespace, schema, schema_hash, updated_by)
		VALUES ($1, $2, $3::jsonb, $4, $5)
		ON CONFLICT (org, namespace) DO UPDATE SET schema = EXCLUDED.schema, schema_hash = EXCLUDED.schema_hash,
			updated_by = EXCLUDED.updated_by, updated_at = now()
		RETURNING updated_at`, org, namespace, string(canonical), hash, by).Scan(&at)
	if err != nil {
		return at, fmt.Errorf("store the profile schema: %w", err)
	}
	return at, nil
}

// WithSchema reports which of org's namespaces have a profile schema.
func WithSchema(ctx context.Context, q heads.Querier, orgs, namespaces []string) (map[[2]string]bool, error) {
	return namespaceSet(ctx, q, `SELECT s.org, s.namespace FROM loom.profile_schemas s
		JOIN unnest($1::text[], $2::text[]) AS n(org, namespace) ON n.org = s.org AND n.namespace = s.namespace`,
		"have a profile schema", orgs, namespaces)
}

// namespaceSet runs query over the namespaces named (orgs[i], namespaces[i]) and
// returns the (org, namespace) pairs it answers; what names them in an error.
func namespaceSet(ctx context.Context, q heads.Querier, query, what string, orgs, namespaces []string) (map[[2]string]bool, error) {
	rows, err := q.Query(ctx, query, orgs, namespaces)
	if err != nil {
		return nil, fmt.Errorf("read which namespaces %s: %w", what, err)
	}
	defer rows.Close()
	out := map[[2]string]bool{}
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			return nil, err
		}
		out[k] = true
	}
	return out, rows.Err()
}

// Changed is a namespace whose schema was set at UpdatedAt.
type Changed struct {
	Org, Namespace string
	UpdatedAt      time.Time
}

// SchemasSince reads the namespaces whose schema was set after since, oldest first.
func SchemasSince(ctx context.Context, q heads.Querier, since time.Time, limit int) ([]Changed, error) {
	return changedSince(ctx, q, `SELECT org, namespace, updated_at FROM loom.profile_schemas WHERE updated_at > $1
		ORDER BY updated_at LIMIT $2`, "the changed profile schemas", since, limit)
}

// changedSince runs query (since, limit) and reads the namespaces it answers, with when
// each changed; what names them in an error.
func changedSince(ctx context.Context, q heads.Querier, query, what string, since time.Time, limit int) ([]Changed, error) {
	rows, err := q.Query(ctx, query, since, limit)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Changed, error) {
		var c Changed
		err := r.Scan(&c.Org, &c.Namespace, &c.UpdatedAt)
		return c, err
	})
}
