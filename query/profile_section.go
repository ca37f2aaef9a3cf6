package query

import (
	"context"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/profiles"
)

// The profile section (internal/profiles, workers/profile_consolidation.go): a user's
// preferences and decisions the profile_consolidation pass wrote, in a namespace that
// opts in. profile.render renders it after the structured profile, and context.pack's
// profile layer packs its statements after the profile's fields. It is read as the
// structured profile is: from its Postgres head, only a row the pass wrote, and a token
// bound to one user reads that user's alone.

// servedSection reads the section the pass wrote for a user, nil when there is none
// the caller may read or the namespace no longer opts in (the pass stopped keeping it
// current).
func (s *Service) servedSection(ctx context.Context, p auth.Principal, ns, userID string) (*memrow.Row, error) {
	row, err := s.servedRow(ctx, p, ns, userID, profiles.SectionIdentity(p.Org, ns, userID), profiles.SectionTrusted, "reading the profile section")
	if err != nil || row == nil {
		return nil, err
	}
	on, err := profiles.ConsolidationOn(ctx, s.pool, p.Org, ns)
	if err != nil {
		return nil, httperr.Store("reading the namespace's configuration", err)
	}
	if !on {
		return nil, nil
	}
	return row, nil
}

// sectionLines are the section's statements as context.pack's profile layer packs
// them ("preference: …", "decision: …"), each citing the section's version; ok is
// false when the user has no section the caller may read.
func (s *Service) sectionLines(ctx context.Context, p auth.Principal, ns, userID string) ([]ProfileLine, bool, error) {
	row, err := s.servedSection(ctx, p, ns, userID)
	if err != nil || row == nil {
		return nil, false, err
	}
	sec, err := profiles.SectionOf(row.Value)
	if err != nil {
		return nil, false, httperr.Store("reading the profile section", err)
	}
	cite := memoryCite(row.MemoryID, row.Version)
	var out []ProfileLine
	for _, text := range profiles.SectionLines(sec) {
		out = append(out, ProfileLine{Cite: cite, Text: text})
	}
	return out, true, nil
}
