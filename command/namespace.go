package command

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/pg"
)

// namespaceAnswer is a namespace's configuration and the policy generation it is at.
type namespaceAnswer struct {
	Namespace        string          `json:"namespace"`
	Config           NamespaceConfig `json:"config"`
	Blacklist        []string        `json:"blacklist"`
	PolicyGeneration int64           `json:"policy_generation"`
}

// getNamespace is namespace.get: the namespace's write configuration.
func (s *Service) getNamespace(ctx context.Context, p auth.Principal, ns string) (namespaceAnswer, error) {
	pol, err := s.loadPolicy(ctx, s.pool, p.Org, ns)
	if err != nil {
		return namespaceAnswer{}, httperr.Store("reading the namespace policy", err)
	}
	return answerOf(ns, pol), nil
}

func answerOf(ns string, pol *policy) namespaceAnswer {
	a := namespaceAnswer{Namespace: ns, Config: pol.config, Blacklist: []string{}, PolicyGeneration: pol.generation}
	for _, e := range pol.blacklist {
		a.Blacklist = append(a.Blacklist, e.pattern)
	}
	return a
}

// configure is namespace.configure: it replaces the namespace's write configuration
// and advances the policy generation, so admissions in flight read it.
func (s *Service) configure(ctx context.Context, p auth.Principal, ns string, cfg NamespaceConfig) (namespaceAnswer, error) {
	if err := cfg.Validate(); err != nil {
		return namespaceAnswer{}, err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return namespaceAnswer{}, err
	}
	err = s.changePolicy(ctx, p.Org, func(tx pgx.Tx) error {
		return storeConfig(ctx, tx, p.Org, ns, raw, p.Actor())
	})
	if err != nil {
		return namespaceAnswer{}, httperr.Store("storing the namespace config", err)
	}
	return s.getNamespace(ctx, p, ns)
}

// changePolicy runs a policy change under the org's policy lock, held exclusively,
// and advances the policy generation in the same transaction.
func (s *Service) changePolicy(ctx context.Context, org string, change func(pgx.Tx) error) error {
	// Policies cached before the change are refused at their commits anyway; this
	// process's writes need not find that out.
	defer s.policies.purge()
	return pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_xact_lock(%s)", policyLockKey), org); err != nil {
			return fmt.Errorf("take the policy lock: %w", err)
		}
		if err := change(tx); err != nil {
			return err
		}
		if _, err := generations.Advance(ctx, tx, org, policyScope, 1); err != nil {
			return fmt.Errorf("advance the policy generation: %w", err)
		}
		return nil
	})
}
