package query

import (
	"context"
	"fmt"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/profiles"
)

// profile.render: a user's structured profile as text for a prompt (markdown, or
// plain text), with the citation a packed context names it by. ProfileSection is the
// same for context.pack, which packs it as the prompt's profile section.

// renderAnswer is profile.render's answer.
type renderAnswer struct {
	Namespace string `json:"namespace"`
	UserID    string `json:"user_id"`
	Format    string `json:"format"`
	Text      string `json:"text"`
	Citation  string `json:"citation"`
}

// ProfileSection renders a user's profile as markdown for a packed context: ok is false
// when there is none the caller may read (no schema, not built yet, another user's).
// citation names the row and version the text was rendered from.
func (s *Service) ProfileSection(ctx context.Context, p auth.Principal, namespace, userID string) (text string, citation string, ok bool, err error) {
	return s.renderProfile(ctx, p, namespace, userID, profiles.FormatMarkdown)
}

func (s *Service) renderProfile(ctx context.Context, p auth.Principal, ns, userID, format string) (string, string, bool, error) {
	row, err := s.servedProfile(ctx, p, ns, userID)
	if err != nil || row == nil {
		return "", "", false, err
	}
	text, err := profiles.Render(userID, row.Value, format)
	if err != nil {
		return "", "", false, httperr.Store("rendering the profile", err)
	}
	return text, fmt.Sprintf("%s/%s@%d", ns, row.MemoryKey, row.Version), true, nil
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
	text, citation, ok, err := s.renderProfile(ctx, p, ns, userID, format)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, httperr.NotFound("no profile of this user has been built")
	}
	return &renderAnswer{Namespace: ns, UserID: userID, Format: format, Text: text, Citation: citation}, nil
}
