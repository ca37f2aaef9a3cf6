package command

import (
	"context"
	"fmt"
	"math"
	"regexp"

	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/retrieval"
)

// Conflict policies: what a namespace does with two statements of one fact.
const (
	PolicyAutoReinforce = "auto_reinforce" // default: the later statement wins, recorded and undoable
	PolicyNewestWins    = "newest_wins"    // the newer row supersedes at once (refines, same key)
	PolicyManualReview  = "manual_review"  // conflicts are flagged for an owner
	PolicyAppendOnly    = "append_only"    // no verdict: every write is kept as written
)

// Expiry actions.
const (
	ExpireTombstone = "tombstone"
	ExpireDemote    = "demote"
	ExpireAnonymize = "anonymize"
)

// TypeConfig is a memory type's configuration within a namespace.
type TypeConfig struct {
	Retype         string   `json:"retype,omitempty"`
	DedupThreshold *float64 `json:"dedup_threshold,omitempty"`
	CharLimit      int      `json:"char_limit,omitempty"`
	RetentionDays  int      `json:"retention_days,omitempty"`
	OnExpire       string   `json:"on_expire,omitempty"`
}

// NamespaceConfig is a namespace's write configuration (PUT /v1/namespaces/{ns}).
type NamespaceConfig struct {
	ConflictPolicy    string                `json:"conflict_policy"`
	ConflictThreshold *float64              `json:"conflict_threshold,omitempty"`
	RetentionDays     int                   `json:"retention_days,omitempty"`
	OnExpire          string                `json:"on_expire,omitempty"`
	Types             map[string]TypeConfig `json:"types,omitempty"`
	// Visibility public: a search over several namespaces reads this one only when
	// no private namespace of it has a hit above the floor.
	Visibility string `json:"visibility,omitempty"`
	// Relations declares each predicate's cardinality, single or multi; a predicate
	// not declared is multi, so no value of it ever closes another.
	Relations map[string]string `json:"relations,omitempty"`
	// RetrievalDefaults are the namespace's search settings (recipe, legs, weights,
	// pool, floors); a request may override each within the same bounds.
	RetrievalDefaults *retrieval.Settings `json:"retrieval_defaults,omitempty"`
	// DailyCostCapUSD is what the namespace may spend on model calls a UTC day
	// (extraction, memory.ask, the conflict resolver); unset: LOOM_DEFAULT_DAILY_COST_CAP_USD.
	DailyCostCapUSD *float64 `json:"daily_cost_cap_usd,omitempty"`
	// ProfileConsolidation opts the namespace in to the profile_consolidation pass: a
	// profile section of each user's preferences and decisions (internal/profiles).
	ProfileConsolidation bool `json:"profile_consolidation,omitempty"`
	// ReflectionDistill opts the namespace in to the reflection_distill pass: an outcome
	// label of each user's quiet session and reflections hidden from unfiltered search
	// (internal/reflections).
	ReflectionDistill bool `json:"reflection_distill,omitempty"`
}

// DefaultConfig is the configuration of a namespace nobody configured.
func DefaultConfig() NamespaceConfig {
	return NamespaceConfig{ConflictPolicy: PolicyAutoReinforce}
}

// Validate checks a configuration before it is stored.
func (c *NamespaceConfig) Validate() error {
	switch c.ConflictPolicy {
	case "":
		c.ConflictPolicy = PolicyAutoReinforce
	case PolicyAutoReinforce, PolicyNewestWins, PolicyManualReview, PolicyAppendOnly:
	default:
		return &memrow.FieldError{Field: "conflict_policy", Code: memrow.CodeValidationFailed,
			Message: "conflict_policy must be newest_wins, auto_reinforce, manual_review or append_only"}
	}
	switch c.Visibility {
	case "", "private", "public":
	default:
		return &memrow.FieldError{Field: "visibility", Code: memrow.CodeValidationFailed, Message: "visibility must be private or public"}
	}
	if v := c.DailyCostCapUSD; v != nil && (*v < 0 || math.IsInf(*v, 0) || math.IsNaN(*v)) {
		return &memrow.FieldError{Field: "daily_cost_cap_usd", Code: memrow.CodeValidationFailed,
			Message: "daily_cost_cap_usd must be a number of dollars, 0 or more (0: no model calls)"}
	}
	if err := checkThreshold("conflict_threshold", c.ConflictThreshold); err != nil {
		return err
	}
	if err := checkRetention("retention_days", c.RetentionDays, c.OnExpire); err != nil {
		return err
	}
	if err := c.validateRelations(); err != nil {
		return err
	}
	if c.RetrievalDefaults != nil {
		if err := c.RetrievalDefaults.Validate("retrieval_defaults"); err != nil {
			return err
		}
	}
	for name, t := range c.Types {
		if err := memrow.ValidateName("types", name); err != nil {
			return err
		}
		field := "types." + name
		if t.Retype != "" {
			if err := memrow.ValidateName(field+".retype", t.Retype); err != nil {
				return err
			}
			if _, chained := c.Types[t.Retype]; chained && c.Types[t.Retype].Retype != "" {
				return &memrow.FieldError{Field: field + ".retype", Code: memrow.CodeValidationFailed, Message: "a retype may not lead to another retype"}
			}
		}
		if err := checkThreshold(field+".dedup_threshold", t.DedupThreshold); err != nil {
			return err
		}
		if t.CharLimit < 0 {
			return &memrow.FieldError{Field: field + ".char_limit", Code: memrow.CodeValidationFailed, Message: "char_limit must not be negative"}
		}
		if err := checkRetention(field+".retention_days", t.RetentionDays, t.OnExpire); err != nil {
			return err
		}
	}
	return nil
}

// validateRelations checks the declared cardinalities and stores each predicate as the
// relation it names (its tense folded: lived_in declares lives_in), the form a
// write's relations are matched in.
func (c *NamespaceConfig) validateRelations() error {
	if len(c.Relations) == 0 {
		c.Relations = nil
		return nil
	}
	canonical := make(map[string]string, len(c.Relations))
	for p, card := range c.Relations {
		field := "relations." + p
		if err := memrow.ValidateIdentity(field, p); err != nil || memrow.Predicate(p) == "" || len(p) > memrow.MaxPredicateBytes {
			return &memrow.FieldError{Field: field, Code: memrow.CodeValidationFailed,
				Message: fmt.Sprintf("a predicate is 1 to %d bytes of text with a word in it", memrow.MaxPredicateBytes)}
		}
		if card != events.CardinalitySingle && card != events.CardinalityMulti {
			return &memrow.FieldError{Field: field, Code: memrow.CodeValidationFailed, Message: "a relation's cardinality is single or multi"}
		}
		k := memrow.RelationKey(p)
		if prev, dup := canonical[k]; dup && prev != card {
			return &memrow.FieldError{Field: field, Code: memrow.CodeValidationFailed,
				Message: "two spellings of predicate " + k + " declare different cardinalities"}
		}
		canonical[k] = card
	}
	c.Relations = canonical
	return nil
}

// cardinality is a predicate's declared cardinality, read for the relation it names
// (lived_in is lives_in); an undeclared one is multi.
func (c *NamespaceConfig) cardinality(predicate string) string {
	if c.Relations[memrow.RelationKey(predicate)] == events.CardinalitySingle {
		return events.CardinalitySingle
	}
	return events.CardinalityMulti
}

func checkThreshold(field string, v *float64) error {
	if v != nil && (*v <= 0 || *v > 1) {
		return &memrow.FieldError{Field: field, Code: memrow.CodeValidationFailed, Message: field + " must be in (0, 1]"}
	}
	return nil
}

func checkRetention(field string, days int, onExpire string) error {
	if days < 0 {
		return &memrow.FieldError{Field: field, Code: memrow.CodeValidationFailed, Message: field + " must not be negative"}
	}
	switch onExpire {
	case "", ExpireTombstone, ExpireDemote, ExpireAnonymize:
		return nil
	}
	return &memrow.FieldError{Field: "on_expire", Code: memrow.CodeValidationFailed, Message: "on_expire must be tombstone, demote or anonymize"}
}

// typeConfig returns the configuration of a memory type (zero when none).
func (c *NamespaceConfig) typeConfig(memoryType string) TypeConfig {
	return c.Types[memoryType]
}

// policy is what a write reads of its namespace's policy, with the org's policy
// generation at the read: a commit that finds the generation moved starts over.
type policy struct {
	config    NamespaceConfig
	blacklist []blacklistEntry
	// allowed are the namespace's allowlisted pairs (conflict_allowlist.go), ids in
	// order; nil when it has none.
	allowed    map[[2]uuid.UUID]struct{}
	generation int64
	// deleted: namespace.delete soft-deleted the namespace; it takes no write until a
	// PUT registers it again.
	deleted bool
}

type blacklistEntry struct {
	pattern string
	re      *regexp.Regexp
}

// policyLockKey is the advisory lock commits hold shared and policy changes hold
// exclusively: a change lands between commits, never under one.
const policyLockKey = `hashtextextended('loom.policy/' || $1, 0)`

// policyScope is the scope of an org's policy generation.
const policyScope = generations.PolicyScope

// policyCache keeps the policy memory.set last read of each namespace, so a write
// reads only its heads. A policy is used with the generation it was read at: a commit
// under a newer one is refused (errPolicyMoved) and drops it, and an answer that
// commits nothing (a refusal, a merge, a dry run) stands only once the generation is
// read and found unmoved (policyStands).
type policyCache struct{ c *lru.Cache[string, *policy] }

const policyCacheSize = 4096

func newPolicyCache() policyCache {
	c, _ := lru.New[string, *policy](policyCacheSize)
	return policyCache{c}
}

func (c policyCache) get(org, ns string) (*policy, bool) { return c.c.Get(org + "/" + ns) }
func (c policyCache) put(org, ns string, p *policy)      { c.c.Add(org+"/"+ns, p) }
func (c policyCache) drop(org, ns string)                { c.c.Remove(org + "/" + ns) }
func (c policyCache) purge()                             { c.c.Purge() }

// policyStands reports whether a round's policy is the namespace's as it is now:
// always for one the round read; for a cached one, when the org's policy generation
// has not moved since (else it is dropped, for the next round to read anew).
func (s *Service) policyStands(ctx context.Context, org, ns string, st *roundState) (bool, error) {
	if !st.policyCached {
		return true, nil
	}
	gen, err := generations.Read(ctx, s.pool, org, policyScope)
	if err != nil {
		return false, httperr.Store("reading the policy generation", err)
	}
	if gen == st.policy.generation {
		return true, nil
	}
	s.policies.drop(org, ns)
	return false, nil
}

func (s *Service) loadPolicy(ctx context.Context, q interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}, org, ns string) (*policy, error) {
	b := &pgx.Batch{}
	finish := queuePolicy(b, org, ns)
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("read the namespace policy: %w", err)
	}
	return finish()
}

// allowlisted reports whether two memories are an allowlisted pair of the namespace.
func (p *policy) allowlisted(x, y string) bool {
	if len(p.allowed) == 0 {
		return false
	}
	a, b, err := orderedPair(x, y)
	if err != nil {
		return false
	}
	_, ok := p.allowed[[2]uuid.UUID{a, b}]
	return ok
}

// blacklisted returns the first pattern text matches.
func (p *policy) blacklisted(text string) (string, bool) {
	for _, e := range p.blacklist {
		if e.re.MatchString(text) {
			return e.pattern, true
		}
	}
	return "", false
}
