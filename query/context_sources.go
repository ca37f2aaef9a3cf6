package query

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/profiles"
)

// The layers of context.pack that other planes fill. Each is an interface the read
// side holds; nil (the default) leaves its section empty and says it is unavailable,
// so a pack answers whatever has landed.

// SessionSource reads a session's record: its last turns (oldest first, at most last)
// and its digest (false when it has none). It reads only what p may read.
type SessionSource interface {
	SessionTurns(ctx context.Context, p auth.Principal, ns, session string, last int) ([]Turn, error)
	SessionDigest(ctx context.Context, p auth.Principal, ns, session string) (string, bool, error)
}

// ProfileLine is one line of a user's profile section, with the citation of the
// memory version it renders.
type ProfileLine struct {
	Cite string `json:"cite"`
	Text string `json:"text"`
}

// ProfileSource renders a user's profile section (false: the user has none).
type ProfileSource interface {
	Profile(ctx context.Context, p auth.Principal, ns, userID string) ([]ProfileLine, bool, error)
}

// KnowledgeChunk is one chunk of the knowledge plane, with its citation.
type KnowledgeChunk struct {
	Cite string `json:"cite"`
	Text string `json:"text"`
	// What memory.ask names of a chunk it cites (its own answer carries them).
	SourceURI string `json:"-"`
	DocID     string `json:"-"`
	Version   int64  `json:"-"`
	Ordinal   int    `json:"-"`
}

// KnowledgeSource finds the k knowledge chunks that answer query, of the documents the
// token sees; userID (the request's user_id) narrows them to the namespace's and that
// user's, as knowledge.search's user_id does.
type KnowledgeSource interface {
	Knowledge(ctx context.Context, p auth.Principal, ns, userID, query string, k int) ([]KnowledgeChunk, error)
}

// WithSessionSource gives context.pack and memory.stack their session layer.
func WithSessionSource(src SessionSource) Option { return func(s *Service) { s.sessions = src } }

// WithProfileSource gives context.pack and memory.stack their profile layer.
func WithProfileSource(src ProfileSource) Option { return func(s *Service) { s.profiles = src } }

// WithKnowledgeSource gives context.pack and memory.stack their knowledge layer.
func WithKnowledgeSource(src KnowledgeSource) Option { return func(s *Service) { s.knowledge = src } }

// SessionDigest is the session layer's digest: the session's newest digest the
// session_digest pass wrote (session_digest.go), within the token's scope.
func (s *Service) SessionDigest(ctx context.Context, p auth.Principal, namespace, sessionID string) (string, bool, error) {
	return s.sessionDigestOf(ctx, p, namespace, sessionID)
}

// profileRows is the profile layer over the structured profiles (profile.go): the
// user's profile rendered as text, a line per rendered line, each citing the profile
// row's version, so the citation resolves as a fact's does; then the statements of the
// user's profile section (profile_section.go), each citing the section's version.
type profileRows struct{ s *Service }

func (r profileRows) Profile(ctx context.Context, p auth.Principal, ns, userID string) ([]ProfileLine, bool, error) {
	row, err := r.s.servedProfile(ctx, p, ns, userID)
	if err != nil {
		return nil, false, err
	}
	var out []ProfileLine
	if row != nil {
		text, err := profiles.Render(userID, row.Value, profiles.FormatText)
		if err != nil {
			return nil, false, fmt.Errorf("rendering the profile: %w", err)
		}
		cite := memoryCite(row.MemoryID, row.Version)
		for i, line := range strings.Split(text, "\n") {
			if i == 0 || strings.TrimSpace(line) == "" { // the first is the "Profile of <user>:" title
				continue
			}
			out = append(out, ProfileLine{Cite: cite, Text: strings.TrimSpace(line)})
		}
	}
	lines, ok, err := r.s.sectionLines(ctx, p, ns, userID)
	if err != nil {
		return nil, false, err
	}
	return append(out, lines...), row != nil || ok, nil
}
