package workers

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/communities"
)

// The entity_communities pass (memory-architecture, "Background passes",
// entity_communities; off by default, LOOM_ENTITY_COMMUNITIES_ENABLED): a paced loop
// that clusters each namespace's co-occurrence graph (the open edges of ClickHouse's
// loom.entity_edges, weighted by the rows naming both ends) by label propagation
// (internal/communities: deterministic, no model), and keeps each entity's community
// in loom.entity_communities through the worker API (command.KeepEntityCommunities),
// replacing the namespace's communities whole. A pass takes up to
// LOOM_ENTITY_COMMUNITIES_BATCH namespaces, the ones computed longest ago first; the
// entity read (GET …/entities/{name}) shows an entity's community. Its stamp is the
// computation's time: a pass killed midway leaves each namespace as it was or
// replaced whole.

const workerCommunities = "entity_communities"

// UseClickHouse gives the passes that read a projection (entity_communities) their
// ClickHouse connection.
func (s *Service) UseClickHouse(conn *ch.Conn) { s.ch = conn }

// RunEntityCommunities runs the entity_communities pass until ctx ends.
func (s *Service) RunEntityCommunities(ctx context.Context) {
	s.runPasses(ctx, workerCommunities, s.cfg.Communities.Interval, 0, s.communitiesPass)
}

// communitiesPass computes the communities of the namespaces due.
func (s *Service) communitiesPass(ctx context.Context) passResult {
	if s.ch == nil {
		return passResult{errors: 1, stopped: true}
	}
	due, err := s.communitiesDue(ctx)
	return s.eachDueNamespace(ctx, "entity communities", due, err, "communities", func(org, namespace string) error {
		return s.computeCommunities(ctx, org, namespace)
	})
}

// eachDueNamespace is the body of a pass over namespaces (entity_communities,
// recalibration): the due list's failure is one error, then each namespace in turn
// until ctx ends, a failed one left as it was and counted.
func (s *Service) eachDueNamespace(ctx context.Context, pass string, due [][2]string, listErr error, what string,
	do func(org, namespace string) error) passResult {
	if listErr != nil {
		if ctx.Err() == nil {
			s.log.Warn(pass+": listing the namespaces failed", "err", listErr)
		}
		return passResult{errors: 1}
	}
	res := passResult{claimed: len(due)}
	for _, k := range due {
		if ctx.Err() != nil {
			break
		}
		if err := do(k[0], k[1]); err != nil {
			if ctx.Err() == nil {
				s.log.Warn(pass+": a namespace's "+what+" stay as they were", "org", k[0], "namespace", k[1], "err", err)
			}
			res.errors++
			continue
		}
		res.done++
	}
	return res
}

// communitiesDue lists the namespaces with a graph, the ones never computed or
// computed longest ago first, up to the pass's batch.
func (s *Service) communitiesDue(ctx context.Context) ([][2]string, error) {
	var all [][2]string
	err := s.ch.Each(s.ch.Ctx(ctx), `SELECT DISTINCT org, namespace FROM loom.entity_edges`, nil, func(scan func(...any) error) error {
		var k [2]string
		if err := scan(&k[0], &k[1]); err != nil {
			return err
		}
		all = append(all, k)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the graphs: %w", err)
	}
	computed, err := communities.Computed(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := computed[all[i]], computed[all[j]]
		if !a.Equal(b) {
			return a.Before(b)
		}
		return all[i][0] < all[j][0] || all[i][0] == all[j][0] && all[i][1] < all[j][1]
	})
	if len(all) > s.cfg.Communities.Batch {
		all = all[:s.cfg.Communities.Batch]
	}
	return all, nil
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
