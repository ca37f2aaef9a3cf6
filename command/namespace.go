package command

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"

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

// handleGetNamespace is namespace.get: the namespace's write configuration.
func (s *Service) handleGetNamespace(c *fiber.Ctx) error {
	p, ns, err := routeNamespace(c, nil)
	if err != nil {
		return err
	}
	pol, err := s.loadPolicy(c.UserContext(), s.pool, p.Org, ns)
	if err != nil {
		return httperr.Store("reading the namespace policy", err)
	}
	return c.JSON(answerOf(ns, pol))
}

func answerOf(ns string, pol *policy) namespaceAnswer {
	a := namespaceAnswer{Namespace: ns, Config: pol.config, Blacklist: []string{}, PolicyGeneration: pol.generation}
	for _, e := range pol.blacklist {
		a.Blacklist = append(a.Blacklist, e.pattern)
	}
	return a
}

// handlePutNamespace is namespace.configure: replaces the namespace's write
// configuration and advances the policy generation, so admissions in flight read it.
func (s *Service) handlePutNamespace(c *fiber.Ctx) error {
	p, ns, err := routeNamespace(c, adminFor("changing a namespace's policy"))
	if err != nil {
		return err
	}
	var cfg NamespaceConfig
	if err := httperr.DecodeBody(c.Body(), &cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	err = s.changePolicy(ctx, p.Org, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO loom.namespaces (org, namespace, config, updated_by) VALUES ($1, $2, $3, $4)
			ON CONFLICT (org, namespace) DO UPDATE SET config = EXCLUDED.config, updated_at = now(), updated_by = EXCLUDED.updated_by`,
			p.Org, ns, raw, p.Actor())
		return err
	})
	if err != nil {
		return httperr.Store("storing the namespace config", err)
	}
	pol, err := s.loadPolicy(ctx, s.pool, p.Org, ns)
	if err != nil {
		return httperr.Store("reading the namespace policy", err)
	}
	return c.JSON(answerOf(ns, pol))
}

// changePolicy runs a policy change under the org's policy lock, held exclusively,
// and advances the policy generation in the same transaction.
func (s *Service) changePolicy(ctx context.Context, org string, change func(pgx.Tx) error) error {
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
