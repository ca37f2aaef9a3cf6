// Package communities holds the entity graph's communities (memory-architecture,
// "Background passes", entity_communities): the label propagation that finds them and
// every statement of loom.entity_communities. The workers' entity_communities pass
// writes them (through command.KeepEntityCommunities); the entity read shows an
// entity's community.
package communities

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Edge is one open co-occurrence of two entities, with its weight.
type Edge struct {
	A, B   string
	Weight uint32
}

// maxRounds bounds label propagation; it settles in a few rounds on real graphs.
const maxRounds = 30

// Propagate finds the communities of a graph by label propagation, deterministic: every
// entity starts as its own label; in rounds, each entity in name order takes the label
// its neighbours carry the most weight of (a tie goes to the smallest label, and an
// entity keeps its own label while it is among the best), until a round changes
// nothing. The answer maps each entity to its community's label.
func Propagate(edges []Edge) map[string]string {
	adj := map[string]map[string]uint32{}
	link := func(a, b string, w uint32) {
		if adj[a] == nil {
			adj[a] = map[string]uint32{}
		}
		adj[a][b] += w
	}
	for _, e := range edges {
		if e.A == e.B || e.Weight == 0 {
			continue
		}
		link(e.A, e.B, e.Weight)
		link(e.B, e.A, e.Weight)
	}
	nodes := make([]string, 0, len(adj))
	label := map[string]string{}
	for n := range adj {
		nodes = append(nodes, n)
		label[n] = n
	}
	slices.Sort(nodes)
	for round := 0; round < maxRounds; round++ {
		changed := false
		for _, n := range nodes {
			weight := map[string]uint32{}
			for m, w := range adj[n] {
				weight[label[m]] += w
			}
			var maxW uint32
			for _, w := range weight {
				maxW = max(maxW, w)
			}
			if weight[label[n]] == maxW {
				continue
			}
			best := ""
			for l, w := range weight {
				if w == maxW && (best == "" || l < best) {
					best = l
				}
			}
			if best != label[n] {
				label[n], changed = best, true
			}
		}
		if !changed {
			break
		}
	}
	return label
}

// Replace sets a namespace's communities to labels (entity → community), in tx.
func Replace(ctx context.Context, tx pgx.Tx, org, ns string, labels map[string]string, at time.Time) error {
	if _, err := tx.Exec(ctx, `DELETE FROM loom.entity_communities WHERE org = $1 AND namespace = $2`, org, ns); err != nil {
		return fmt.Errorf("clear the namespace's communities: %w", err)
	}
	if len(labels) == 0 {
		return nil
	}
	size := map[string]int32{}
	for _, c := range labels {
		size[c]++
	}
	var ents, comms []string
	var sizes []int32
	for e, c := range labels {
		ents, comms, sizes = append(ents, e), append(comms, c), append(sizes, size[c])
	}
	if _, err := tx.Exec(ctx, `INSERT INTO loom.entity_communities (org, namespace, entity, community, size, computed_at)
		SELECT $1, $2, e, c, s, $6 FROM unnest($3::text[], $4::text[], $5::int[]) AS x(e, c, s)`,
		org, ns, ents, comms, sizes, at); err != nil {
		return fmt.Errorf("keep the namespace's communities: %w", err)
	}
	return nil
}

// Community is an entity's community as the entity read shows it.
type Community struct {
	ID         string    `json:"id"`
	Size       int       `json:"size"`
	Members    []string  `json:"members"` // by name, at most the read's limit
	ComputedAt time.Time `json:"computed_at"`
}

// Querier is what Read reads through.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Read is an entity's community with up to limit members by name, or nil when the
// pass has not placed it.
func Read(ctx context.Context, q Querier, org, ns, entity string, limit int) (*Community, error) {
	var c Community
	err := q.QueryRow(ctx, `SELECT community, size, computed_at FROM loom.entity_communities WHERE org = $1 AND namespace = $2 AND entity = $3`,
		org, ns, entity).Scan(&c.ID, &c.Size, &c.ComputedAt)
	if err == pgx.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the entity's community: %w", err)
	}
	rows, err := q.Query(ctx, `SELECT entity FROM loom.entity_communities WHERE org = $1 AND namespace = $2 AND community = $3
		ORDER BY entity LIMIT $4`, org, ns, c.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("read the community's members: %w", err)
	}
	if c.Members, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return nil, fmt.Errorf("read the community's members: %w", err)
	}
	c.ComputedAt = c.ComputedAt.UTC()
	return &c, nil
}

// ComputedAt is when a namespace's communities were last computed (zero: never, or
// the namespace has none).
func ComputedAt(ctx context.Context, q Querier, org, ns string) (time.Time, error) {
	var at *time.Time
	if err := q.QueryRow(ctx, `SELECT max(computed_at) FROM loom.entity_communities WHERE org = $1 AND namespace = $2`, org, ns).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("read when the communities were computed: %w", err)
	}
	if at == nil {
		return time.Time{}, nil
	}
	return *at, nil
}

// Summary is a community as search's entity-summary leg serves it: its members (at
// most the read's limit, by name) and which of the names asked for it holds.
type Summary struct {
	Community
	Named []string
}

// Summaries reads the communities of a namespace that hold any of names (canonical
// entity names), each with up to limit members by name.
func Summaries(ctx context.Context, q Querier, org, ns string, names []string, limit int) ([]Summary, error) {
	if len(names) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `WITH named AS (
			SELECT community, array_agg(entity ORDER BY entity) AS named FROM loom.entity_communities
			WHERE org = $1 AND namespace = $2 AND entity = ANY($3) GROUP BY community)
		SELECT n.community, n.named, c.size, max(c.computed_at), (array_agg(c.entity ORDER BY c.entity))[1:$4]
		FROM named n JOIN loom.entity_communities c ON c.org = $1 AND c.namespace = $2 AND c.community = n.community
		GROUP BY n.community, n.named, c.size ORDER BY n.community`, org, ns, names, limit)
	if err != nil {
		return nil, fmt.Errorf("read the communities of the named entities: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Summary, error) {
		var s Summary
		err := r.Scan(&s.ID, &s.Named, &s.Size, &s.ComputedAt, &s.Members)
		s.ComputedAt = s.ComputedAt.UTC()
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the communities of the named entities: %w", err)
	}
	return out, nil
}
