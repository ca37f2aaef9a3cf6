package profiles

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// The profile section (memory-architecture, "Background passes", profile_consolidation):
// in a namespace whose configuration opts in (profile_consolidation), one section per
// user of their preferences and decisions, which the profile_consolidation pass writes
// from the user's preference and decision memories with one model call. It is a memory
// row of type profile (not searchable) at key profile_section:<user>, agent and session
// -, so its history, erasure and read scope are memory's; it carries the same stamp as
// a structured profile (Stamp: the hash of the pass's schema and prompt, the digest of
// its sources, their count), so it is rebuilt only when its sources change.

// SectionActor is the actor of every section the pass writes; readers trust a section
// only with it (no token maps to a worker: actor).
const SectionActor = "worker:profile_consolidation"

// SectionKeyPrefix starts every section's key.
const SectionKeyPrefix = "profile_section:"

// SectionTypes are the memory types a section is built from.
var SectionTypes = []string{"preference", "decision"}

// Section is a section's value.
type Section struct {
	Preferences []string `json:"preferences"`
	Decisions   []string `json:"decisions"`
}

// SectionIdentity is the key of a user's section in a namespace.
func SectionIdentity(org, namespace, userID string) memrow.Identity {
	id := Identity(org, namespace, userID)
	id.MemoryKey = SectionKeyPrefix + userID
	return id
}

// SectionTrusted reports whether a head is a section the pass wrote, live.
func SectionTrusted(r *memrow.Row, now time.Time) bool {
	return r != nil && r.Actor == SectionActor && r.MemoryType == MemoryType && r.Live(now) && !r.Redacted
}

// SectionFacts reads a user's preference and decision memories in a namespace, newest
// first, at most MaxSources: the live accepted ones, not high and not redacted (Source).
func SectionFacts(ctx context.Context, q heads.Querier, org, namespace, userID string, now time.Time) ([]*memrow.Row, error) {
	rows, err := heads.OfUser(ctx, q, org, namespace, userID, 4*MaxSources,
		`NOT (row->>'tombstone')::boolean AND row->>'memory_type' = ANY($3)`, SectionTypes)
	if err != nil {
		return nil, fmt.Errorf("read the user's preferences and decisions: %w", err)
	}
	return newestSources(rows, now), nil
}

// newestSources keeps the rows a profile may be built from, newest first, at most
// MaxSources.
func newestSources(rows []*memrow.Row, now time.Time) []*memrow.Row {
	out := rows[:0]
	for _, r := range rows {
		if Source(r, now) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].UpdatedAt.Equal(out[j].UpdatedAt) {
			return out[i].UpdatedAt.After(out[j].UpdatedAt)
		}
		return out[i].MemoryID < out[j].MemoryID
	})
	if len(out) > MaxSources {
		out = out[:MaxSources]
	}
	return out
}

// optedIn is a namespace configuration that opts in: the Go configuration stores the
// switch as JSON true or leaves it out, so containment reads it without a cast.
const optedIn = `config @> '{"profile_consolidation": true}' AND deleted_at IS NULL`

// ConsolidationOn reports whether a namespace opts in to profile sections.
func ConsolidationOn(ctx context.Context, q heads.Querier, org, namespace string) (bool, error) {
	var on bool
	err := q.QueryRow(ctx, `SELECT `+optedIn+` FROM loom.namespaces WHERE org = $1 AND namespace = $2`, org, namespace).Scan(&on)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read whether the namespace keeps profile sections: %w", err)
	}
	return on, nil
}

// ConsolidationOf reports which of the namespaces named (orgs[i], namespaces[i]) opt in.
func ConsolidationOf(ctx context.Context, q heads.Querier, orgs, namespaces []string) (map[[2]string]bool, error) {
	return namespaceSet(ctx, q, `SELECT s.org, s.namespace FROM loom.namespaces s
		JOIN unnest($1::text[], $2::text[]) AS n(org, namespace) ON n.org = s.org AND n.namespace = s.namespace
		WHERE s.`+optedIn, "keep profile sections", orgs, namespaces)
}

// OptedInSince reads the namespaces that opt in whose configuration was stored after
// since, oldest first (the partial index of migration 122 serves it).
func OptedInSince(ctx context.Context, q heads.Querier, since time.Time, limit int) ([]Changed, error) {
	return changedSince(ctx, q, `SELECT org, namespace, updated_at FROM loom.namespaces WHERE `+optedIn+` AND updated_at > $1
		ORDER BY updated_at LIMIT $2`, "the namespaces that opted in to profile sections", since, limit)
}

// SectionOf reads a section's value.
func SectionOf(value json.RawMessage) (Section, error) {
	var s Section
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("read the profile section: %w", err)
	}
	return s, nil
}

// SectionLines are a section's statements, each named by its kind ("preference: …",
// "decision: …"), preferences first, in the section's order; blanks are left out.
func SectionLines(s Section) []string {
	var out []string
	for _, part := range []struct {
		kind  string
		items []string
	}{{"preference", s.Preferences}, {"decision", s.Decisions}} {
		for _, it := range part.items {
			if it = strings.TrimSpace(it); it != "" {
				out = append(out, part.kind+": "+it)
			}
		}
	}
	return out
}

// RenderSection writes a section as prompt text: a heading, then its preferences and
// its decisions, each a list under its own heading (an empty one left out).
func RenderSection(userID string, value json.RawMessage, format string) (string, error) {
	s, err := SectionOf(value)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if format == FormatMarkdown {
		fmt.Fprintf(&b, "## Preferences and decisions of %s\n", userID)
	} else {
		fmt.Fprintf(&b, "Preferences and decisions of %s:\n", userID)
	}
	for _, part := range []struct {
		title string
		items []string
	}{{"Preferences", s.Preferences}, {"Decisions", s.Decisions}} {
		var items []string
		for _, it := range part.items {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		if len(items) == 0 {
			continue
		}
		if format == FormatMarkdown {
			fmt.Fprintf(&b, "### %s\n", part.title)
		} else {
			fmt.Fprintf(&b, "  %s:\n", part.title)
		}
		for _, it := range items {
			if format == FormatMarkdown {
				fmt.Fprintf(&b, "- %s\n", it)
			} else {
				fmt.Fprintf(&b, "    - %s\n", it)
			}
		}
	}
	return b.String(), nil
}
