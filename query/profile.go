package query

import (
	"context"
	"encoding/json"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/profiles"
)

// profile.structured: a user's structured profile in a namespace with a profile
// schema, as the structured_profile pass last built it (a memory row of type profile
// at key profile:<user>, read from its Postgres head like memory.get). The user's
// facts are digested again, with no model call, so the answer says whether the
// profile is stale: a fact changed, or the schema did, since it was built. Only a row
// the pass wrote counts: a value someone wrote at the key with memory.set is no
// profile. A token bound to one user reads that user's profile alone.

// profileAnswer is profile.structured's answer.
type profileAnswer struct {
	Namespace   string          `json:"namespace"`
	UserID      string          `json:"user_id"`
	Profile     json.RawMessage `json:"profile"`
	MemoryID    string          `json:"memory_id"`
	MemoryKey   string          `json:"memory_key"`
	Version     int64           `json:"version"`
	VersionText string          `json:"version_text"`
	UpdatedAt   time.Time       `json:"updated_at"`
	SchemaHash  string          `json:"schema_hash"`
	Digest      string          `json:"digest"`
	Sources     int             `json:"sources"`
	// Stale: the user's facts or the namespace's schema changed since the build; the
	// pass builds it again.
	Stale bool `json:"stale"`
}

// servedProfile reads the profile the pass wrote for a user, nil when there is none
// the caller may read.
func (s *Service) servedProfile(ctx context.Context, p auth.Principal, ns, userID string) (*memrow.Row, error) {
	return s.servedRow(ctx, p, ns, userID, profiles.Identity(p.Org, ns, userID), profiles.Trusted, "reading the profile")
}

// servedRow reads a user's row a pass wrote at id, nil when the caller may not read it
// or trusted does not take it for the pass's; doing names the read in an error.
func (s *Service) servedRow(ctx context.Context, p auth.Principal, ns, userID string, id memrow.Identity,
	trusted func(*memrow.Row, time.Time) bool, doing string) (*memrow.Row, error) {
	if !p.Reaches(ns) || !p.ActsOn(userID) {
		return nil, nil
	}
	row, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return nil, httperr.Store(doing, err)
	}
	if !trusted(row, s.now()) {
		return nil, nil
	}
	return row, nil
}

// structuredProfile is profile.structured.
func (s *Service) structuredProfile(ctx context.Context, p auth.Principal, ns, userID string) (*profileAnswer, error) {
	schema, err := profiles.ReadSchema(ctx, s.pool, p.Org, ns)
	if err != nil {
		return nil, httperr.Store("reading the profile schema", err)
	}
	if schema == nil {
		return nil, httperr.NotFound("the namespace has no profile schema (profile_schema.set)")
	}
	row, err := s.servedProfile(ctx, p, ns, userID)
	if err != nil {
		return nil, err
	}
	if row == nil {
		return nil, httperr.NotFound("no profile of this user has been built")
	}
	facts, err := profiles.Facts(ctx, s.pool, p.Org, ns, userID, s.now())
	if err != nil {
		return nil, httperr.Store("reading the user's facts", err)
	}
	stamp := profiles.StampOf(row)
	now := profiles.Stamp{SchemaHash: schema.Hash, Digest: profiles.Digest(facts), Sources: len(facts)}
	return &profileAnswer{Namespace: ns, UserID: userID, Profile: row.Value, MemoryID: row.MemoryID, MemoryKey: row.MemoryKey,
		Version: row.Version, VersionText: memrow.VersionText(row.Version), UpdatedAt: row.UpdatedAt,
		SchemaHash: stamp.SchemaHash, Digest: stamp.Digest, Sources: stamp.Sources, Stale: stamp != now}, nil
}
