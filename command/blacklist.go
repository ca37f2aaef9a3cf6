package command

import (
	"context"
	"regexp"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// maxPatternChars bounds a blacklist pattern; RE2 runs in linear time, so length is
// the only cost to bound.
const maxPatternChars = 1000

type blacklistRequest struct {
	Pattern string `json:"pattern"`
}

// patternChange is what a blacklist change does to the namespace's patterns.
type patternChange func(ctx context.Context, tx pgx.Tx, p auth.Principal, ns, pattern string) error

// changeBlacklist checks a pattern and changes the namespace's blacklist with it, as a
// policy change.
func (s *Service) changeBlacklist(ctx context.Context, p auth.Principal, ns, pattern string, change patternChange) (namespaceAnswer, error) {
	if err := checkPattern(pattern); err != nil {
		return namespaceAnswer{}, err
	}
	err := s.changePolicy(ctx, p.Org, func(tx pgx.Tx) error { return change(ctx, tx, p, ns, pattern) })
	if err != nil {
		return namespaceAnswer{}, httperr.Store("changing the blacklist", err)
	}
	return s.getNamespace(ctx, p, ns)
}

// checkPattern holds a blacklist pattern to its limits: 1 to 1000 characters of text
// that compile as RE2.
func checkPattern(pattern string) error {
	if pattern == "" || utf8.RuneCountInString(pattern) > maxPatternChars {
		return httperr.Validation("pattern", "pattern must be 1 to 1000 characters")
	}
	if err := memrow.CheckText("pattern", pattern); err != nil {
		return err
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return httperr.Validation("pattern", "not a valid RE2 pattern: "+err.Error())
	}
	return nil
}
