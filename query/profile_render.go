package query

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/profiles"
)

// profile.render: a user's structured profile, then their profile section of
// preferences and decisions (profile_section.go), as text for a prompt (markdown, or
// plain text), with the citations a packed context names them by. ProfileSection is
// the same as markdown.

// renderAnswer is profile.render's answer.
type renderAnswer struct {
	Namespace string `json:"namespace"`
	UserID    string `json:"user_id"`
	Format    string `json:"format"`
	Text      string `json:"text"`
	// Citation names the first row rendered (the structured profile when there is
	// one); Citations every row, in the text's order.
	Citation  string   `json:"citation"`
	Citations []string `json:"citations"`
}

// ProfileSection renders a user's profile as markdown for a packed context: ok is false
// when there is none the caller may read (no schema, not built yet, another user's).
// citation names the first row and version the text was rendered from.
func (s *Service) ProfileSection(ctx context.Context, p auth.Principal, namespace, userID string) (text string, citation string, ok bool, err error) {
	text, cites, ok, err := s.renderProfile(ctx, p, namespace, userID, profiles.FormatMarkdown)
	if !ok || err != nil {
		return "", "", false, err
	}
	return text, cites[0], true, nil
}

// renderProfile renders the user's structured profile, then their profile section,
// each the caller may read; ok is false when there is neither.
func (s *Service) renderProfile(ctx context.Context, p auth.Principal, ns, userID, format string) (string, []string, bool, error) {
	row, err := s.servedProfile(ctx, p, ns, userID)
	if err != nil {
		return "", nil, false, err
	}
	section, err := s.servedSection(ctx, p, ns, userID)
	if err != nil {
		return "", nil, false, err
	}
	var parts, cites []string
	for _, r := range []struct {
		row    *memrow.Row
		render func(string, json.RawMessage, string) (string, error)
	}{{row, profiles.Render}, {section, profiles.RenderSection}} {
		if r.row == nil {
			continue
		}
		text, err := r.render(userID, r.row.Value, format)
		if err != nil {
			return "", nil, false, httperr.Store("rendering the profile", err)
		}
		parts, cites = append(parts, text), append(cites, fmt.Sprintf("%s/%s@%d", ns, r.row.MemoryKey, r.row.Version))
	}
	if len(parts) == 0 {
		return "", nil, false, nil
	}
	return strings.Join(parts, "\n"), cites, true, nil
}

// profileRender is profile.render.
func (s *Service) profileRender(ctx context.Context, p auth.Principal, ns, userID, format string) (*renderAnswer, error) {
	switch format {
	case "":
		format = profiles.FormatMarkdown
	case profiles.FormatMarkdown, profiles.FormatText:
	default:
		return nil, httperr.Validation("format", `format is "markdown" or "text"`)
	}
	text, cites, ok, err := s.renderProfile(ctx, p, ns, userID, format)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, httperr.NotFound("no profile of this user has been built")
	}
	return &renderAnswer{Namespace: ns, UserID: userID, Format: format, Text: text, Citation: cites[0], Citations: cites}, nil
}
