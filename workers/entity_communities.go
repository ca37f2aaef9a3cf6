package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/communities"
)

// The entity_communities pass (memory-architecture, "Background passes",
// entity_communities; off by default, LOOM_ENTITY_COMMUNITIES_ENABLED): a consumer of
// the topic (due_passes.go) for which any revision makes its namespace due. It
// clusters a due namespace's co-occurrence graph (the open edges of ClickHouse's
// loom.entity_edges, weighted by the rows naming both ends) by label propagation
// (internal/communities: deterministic, no model), once the projection holds the
// namespace's records it is due for (the newer wait for it), and keeps each entity's community in
// loom.entity_communities through the worker API (command.KeepEntityCommunities),
// replacing the namespace's communities whole. A namespace is computed at most once
// per LOOM_ENTITY_COMMUNITIES_INTERVAL_MS: records after a computation wait for the
// interval's end, then one computation stamps them all. The entity read
// (GET …/entities/{name}) shows an entity's community. A pass killed midway leaves
// each namespace as it was or replaced whole, and its items owed.

const workerCommunities = "entity_communities"

// UseClickHouse gives the passes that read a projection (entity_communities) their
// ClickHouse connection.
func (s *Service) UseClickHouse(conn *ch.Conn) { s.ch = conn }

// RunEntityCommunities runs the entity_communities pass until ctx ends: woken by its
// feed, and every minute at most for the namespaces whose interval ended.
func (s *Service) RunEntityCommunities(ctx context.Context) {
	cfg := s.cfg.Communities
	s.runPasses(ctx, workerCommunities, s.soon(workerCommunities), cfg.MaxAge+24*time.Hour, s.communitiesPass)
}

// communitiesPass computes the communities of the namespaces of a batch of records.
func (s *Service) communitiesPass(ctx context.Context) passResult {
	if s.ch == nil {
		return passResult{errors: 1, stopped: true}
	}
	cfg := s.cfg.Communities
	return s.dueNamespacePass(ctx, workerCommunities, cfg.Batch, cfg.MaxAge, outcomeComputed, true, func(ctx context.Context, d dueNamespace) error {
		last, err := communities.ComputedAt(ctx, s.pool, d.org, d.namespace)
		if err != nil {
			return err
		}
		if err := s.spaced(last, cfg.Interval); err != nil {
			return err
		}
		return s.computeCommunities(ctx, d.org, d.namespace)
	})
}

// computeCommunities reads a namespace's open edges and keeps their communities.
func (s *Service) computeCommunities(ctx context.Context, org, ns string) error {
	type pair struct{ a, b string }
	type interval struct {
		opened uint64
		weight uint32
		open   bool
	}
	latest := map[pair]interval{}
	err := s.ch.Each(s.ch.Ctx(ctx), `SELECT entity_a, entity_b, opened_seq, argMax(weight, seq), argMax(valid_to, seq)
		FROM loom.entity_edges PREWHERE org = ? AND namespace = ?
		GROUP BY entity_a, entity_b, opened_seq`, []any{org, ns}, func(scan func(...any) error) error {
		var p pair
		var iv interval
		var validTo *time.Time
		if err := scan(&p.a, &p.b, &iv.opened, &iv.weight, &validTo); err != nil {
			return err
		}
		iv.open = validTo == nil
		if cur, ok := latest[p]; !ok || iv.opened > cur.opened {
			latest[p] = iv
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the graph: %w", err)
	}
	var edges []communities.Edge
	for p, iv := range latest {
		if iv.open {
			edges = append(edges, communities.Edge{A: p.a, B: p.b, Weight: iv.weight})
		}
	}
	kept, err := s.cmd.KeepEntityCommunities(ctx, org, ns, communities.Propagate(edges), s.now())
	if err != nil {
		return fmt.Errorf("keep the communities: %w", err)
	}
	if !kept {
		return errOrgErasing
	}
	return nil
}
