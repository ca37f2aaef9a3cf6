package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// namespace.validate is a dry run of the namespace's policy over its contents: it
// re-checks the stored policy by this build's rules and each live head by what the
// policy now says, and reports what it finds without changing anything. A policy
// changed after rows were written (a blacklist pattern, a char limit, a threshold)
// leaves rows a write would refuse today; validate names them so an admin can sweep,
// edit or retune. It reads the authority's heads (at most validateMaxHeads, in key
// order; coverage says whether it read them all) and names every user's keys, so it
// is an admin's who reaches every user.

// validateMaxHeads bounds the heads one report reads; validateMaxCited the findings
// it cites one by one (every finding is counted).
const (
	validateMaxHeads = 20000
	validateMaxCited = 200
)

// Finding codes and severities.
const (
	findingPolicyInvalid      = "POLICY_INVALID"
	findingPatternInvalid     = "BLACKLIST_PATTERN_INVALID"
	findingThresholdOrder     = "THRESHOLD_ABOVE_DUPLICATE"
	findingBlacklisted        = "BLACKLISTED_CONTENT"
	findingOverCharLimit      = "OVER_CHAR_LIMIT"
	findingUnresolvedConflict = "UNRESOLVED_CONFLICT"
	findingJudgementOwed      = "JUDGEMENT_OWED"
	findingRetypePending      = "RETYPE_PENDING"
	severityError             = "error"
	severityWarning           = "warning"
)

// finding is one problem validate found: of the policy (field) or of a head (key).
type finding struct {
	Code      string `json:"code"`
	Severity  string `json:"severity"`
	Field     string `json:"field,omitempty"`
	MemoryKey string `json:"memory_key,omitempty"`
	Agent     string `json:"agent,omitempty"`
	UserID    string `json:"user_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	MemoryID  string `json:"memory_id,omitempty"`
	Version   int64  `json:"version,omitempty"`
	Message   string `json:"message"`
}

// validateAnswer is namespace.validate's report.
type validateAnswer struct {
	Namespace string         `json:"namespace"`
	Valid     bool           `json:"valid"` // no finding of severity error
	Findings  []finding      `json:"findings"`
	Counts    map[string]int `json:"counts"`
	Checked   struct {
		Heads    int `json:"heads"`
		Patterns int `json:"patterns"`
	} `json:"checked"`
	Coverage struct {
		Complete bool `json:"complete"`
	} `json:"coverage"`
}

func (a *validateAnswer) add(f finding) {
	a.Counts[f.Code]++
	if f.Severity == severityError {
		a.Valid = false
	}
	if len(a.Findings) < validateMaxCited {
		a.Findings = append(a.Findings, f)
	}
}

// validateNamespace is namespace.validate.
func (s *Service) validateNamespace(ctx context.Context, p auth.Principal, ns string) (*validateAnswer, error) {
	if err := p.RequireAdmin("validating a namespace"); err != nil {
		return nil, err
	}
	if err := p.RequireEveryUser("validating a namespace"); err != nil {
		return nil, err
	}
	ans := &validateAnswer{Namespace: ns, Valid: true, Findings: []finding{}, Counts: map[string]int{}}
	cfg, found, err := s.storedConfig(ctx, p.Org, ns)
	if err != nil {
		return nil, httperr.Store("reading the namespace policy", err)
	}
	if !found {
		return nil, httperr.NotFound("namespace not found")
	}
	s.validatePolicy(ans, cfg)
	patterns, err := s.validatePatterns(ctx, p.Org, ns, ans)
	if err != nil {
		return nil, httperr.Store("reading the namespace's blacklist", err)
	}
	if err := s.validateHeads(ctx, p.Org, ns, cfg, &policy{config: cfg, blacklist: patterns}, ans); err != nil {
		return nil, httperr.Store("reading the namespace's heads", err)
	}
	return ans, nil
}

// storedConfig reads the namespace's stored configuration as it is, before any
// defaulting; found is false for a namespace never registered or soft-deleted.
func (s *Service) storedConfig(ctx context.Context, org, ns string) (NamespaceConfig, bool, error) {
	var raw []byte
	var deleted bool
	err := s.pool.QueryRow(ctx, `SELECT config, deleted_at IS NOT NULL FROM loom.namespaces WHERE org = $1 AND namespace = $2`, org, ns).
		Scan(&raw, &deleted)
	if errors.Is(err, pgx.ErrNoRows) {
		// A namespace nobody configured runs the default policy once written to.
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM loom.memory_current WHERE org = $1 AND namespace = $2`, org, ns).Scan(&n); err != nil {
			return NamespaceConfig{}, false, err
		}
		return DefaultConfig(), n > 0, nil
	}
	if err != nil || deleted {
		return NamespaceConfig{}, false, err
	}
	cfg := DefaultConfig()
	if raw != nil {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return NamespaceConfig{}, false, fmt.Errorf("decode the namespace config: %w", err)
		}
	}
	return cfg, true, nil
}

// validatePolicy re-checks the stored policy by this build's rules, and each similarity
// threshold against LOOM_DUPLICATE_THRESHOLD: a close peer at or above it may be a
// duplicate, so a conflict threshold above it makes every close peer a duplicate
// candidate and no peer ever a plain conflict.
func (s *Service) validatePolicy(ans *validateAnswer, cfg NamespaceConfig) {
	check := cfg
	if err := check.Validate(); err != nil {
		f := finding{Code: findingPolicyInvalid, Severity: severityError, Message: err.Error()}
		var fe *memrow.FieldError
		if errors.As(err, &fe) {
			f.Field, f.Message = fe.Field, fe.Message
		}
		ans.add(f)
	}
	dup := s.cfg.DuplicateThreshold
	over := func(field string, v *float64) {
		if v != nil && dup > 0 && *v > dup {
			ans.add(finding{Code: findingThresholdOrder, Severity: severityWarning, Field: field,
				Message: fmt.Sprintf("%s %.3f is above LOOM_DUPLICATE_THRESHOLD %.3f: no close peer is ever judged a conflict", field, *v, dup)})
		}
	}
	over("conflict_threshold", cfg.ConflictThreshold)
	names := make([]string, 0, len(cfg.Types))
	for name := range cfg.Types {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		over("types."+name+".dedup_threshold", cfg.Types[name].DedupThreshold)
	}
}

// validatePatterns compiles each stored blacklist pattern with this build's RE2; a
// pattern that no longer compiles is an error (every write to the namespace fails on
// it), and is left out of the content checks.
func (s *Service) validatePatterns(ctx context.Context, org, ns string, ans *validateAnswer) ([]blacklistEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT pattern FROM loom.blacklist WHERE org = $1 AND namespace = $2 ORDER BY pattern`, org, ns)
	if err != nil {
		return nil, err
	}
	pats, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	ans.Checked.Patterns = len(pats)
	var out []blacklistEntry
	for _, pat := range pats {
		re, err := regexp.Compile(pat)
		if err != nil {
			ans.add(finding{Code: findingPatternInvalid, Severity: severityError, Field: "blacklist",
				Message: fmt.Sprintf("pattern %q no longer compiles (every write to the namespace fails on it): %v", pat, err)})
			continue
		}
		out = append(out, blacklistEntry{pattern: pat, re: re})
	}
	return out, nil
}

// validateHeads reads the live heads in key order and checks each against the policy.
func (s *Service) validateHeads(ctx context.Context, org, ns string, cfg NamespaceConfig, pol *policy, ans *validateAnswer) error {
	var after memrow.Identity
	ans.Coverage.Complete = true
	for ans.Checked.Heads < validateMaxHeads {
		page, err := s.headPage(ctx, org, ns, after, min(500, validateMaxHeads-ans.Checked.Heads), true)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		after = page[len(page)-1].Identity
		for _, h := range page {
			ans.Checked.Heads++
			for _, f := range headFindings(h, cfg, pol) {
				ans.add(f)
			}
		}
	}
	more, err := s.headPage(ctx, org, ns, after, 1, true)
	if err != nil {
		return err
	}
	ans.Coverage.Complete = len(more) == 0
	return nil
}

// headFindings are the problems of one live head under the policy.
func headFindings(h *memrow.Row, cfg NamespaceConfig, pol *policy) []finding {
	at := func(code, severity, msg string) finding {
		return finding{Code: code, Severity: severity, MemoryKey: h.MemoryKey, Agent: h.Agent, UserID: h.UserID,
			SessionID: h.SessionID, MemoryID: h.MemoryID, Version: h.Version, Message: msg}
	}
	if h.Tombstone {
		return nil
	}
	var out []finding
	if !h.Redacted {
		if pat, hit := pol.blacklisted(memrow.ValueText(h.Value)); hit {
			out = append(out, at(findingBlacklisted, severityError,
				fmt.Sprintf("the value matches blacklist pattern %q; a sweep (POST …/blacklist:sweep) would delete it", pat)))
		}
	}
	tc := cfg.typeConfig(h.MemoryType)
	if tc.CharLimit > 0 && !h.Redacted {
		if err := memrow.CheckCharLimit(h.Value, tc.CharLimit); err != nil {
			out = append(out, at(findingOverCharLimit, severityWarning, "the value "+err.Error()+" of type "+h.MemoryType))
		}
	}
	if tc.Retype != "" {
		out = append(out, at(findingRetypePending, severityWarning,
			fmt.Sprintf("type %s is retyped to %s; the row was written before", h.MemoryType, tc.Retype)))
	}
	switch {
	case h.Status == memrow.StatusConflicted:
		out = append(out, at(findingUnresolvedConflict, severityWarning, "the memory is in an unresolved conflict"))
	case h.JudgementOwed:
		out = append(out, at(findingJudgementOwed, severityWarning, "the conflict resolver has not judged the memory yet"))
	}
	return out
}
