package query

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/communities"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// The entity read answers from the graph tables, behind the barrier: an entity, its
// aliases, the facts it is the subject or object of and its strongest edges. Facts
// and edges are intervals of valid time; as_of picks those that held at a past time.
// A token bound to one user sees only what its user's rows name.

// maxEdges bounds the edges one entity read answers.
const maxEdges = 100

// factView is one observation of a fact.
type factView struct {
	Subject     string       `json:"subject"`
	Predicate   string       `json:"predicate"`
	Object      string       `json:"object"`
	Cardinality string       `json:"cardinality"`
	ValidFrom   time.Time    `json:"valid_from"`
	ValidTo     *time.Time   `json:"valid_to"`
	InvalidAt   *time.Time   `json:"invalid_at"`
	SeenAt      time.Time    `json:"seen_at"`
	Restored    bool         `json:"restored"`
	Fallback    bool         `json:"fallback"`
	Open        bool         `json:"open"`
	Rows        []factRowRef `json:"rows"`
	observedSeq uint64
}

// factRowRef is a row that stated a fact; holds says whether it still does.
type factRowRef struct {
	MemoryID  string `json:"memory_id"`
	MemoryKey string `json:"memory_key"`
	Agent     string `json:"agent"`
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
	Holds     bool   `json:"holds"`
}

// edgeView is one interval of a co-occurrence, seen from the entity read.
type edgeView struct {
	Entity    string     `json:"entity"`
	Weight    uint32     `json:"weight"`
	ValidFrom time.Time  `json:"valid_from"`
	ValidTo   *time.Time `json:"valid_to"`
	Open      bool       `json:"open"`
}

type entityAnswer struct {
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Type      string     `json:"type,omitempty"`
	Aliases   []string   `json:"aliases"`
	Facts     []factView `json:"facts"`
	Edges     []edgeView `json:"edges"`
	AsOf      *time.Time `json:"as_of,omitempty"`
	Barrier   Passed     `json:"barrier"`
	// Community is the entity's community as the entity_communities pass last found it
	// (omitted before it has, for a read as_of a past time, and for a token bound to one
	// user: the namespace's whole graph names other users' entities).
	Community *communities.Community `json:"community,omitempty"`
}

// maxCommunityMembers bounds the members an entity read lists of its community.
const maxCommunityMembers = 50

// graphRead is what one entity read asks for.
type graphRead struct {
	org, namespace, name string
	userID               string // the token's read scope, "" for all
	asOf                 *time.Time
	includeClosed        bool
	edges                int
	now                  time.Time
}

// holds reports whether an interval is in the answer: one holding at as_of (started
// by then, not ended), or without as_of one not ended yet (a value dated ahead
// included); include_closed takes every interval that started by as_of.
func (g graphRead) holds(from time.Time, to *time.Time) bool {
	at := g.now
	if g.asOf != nil {
		at = *g.asOf
		if from.After(at) {
			return false
		}
	}
	return g.includeClosed || to == nil || to.After(at)
}

// open reports whether an interval has not ended at as_of (or now).
func (g graphRead) open(to *time.Time) bool {
	at := g.now
	if g.asOf != nil {
		at = *g.asOf
	}
	return to == nil || to.After(at)
}

// entityCall is an entity read of a namespace: the name as the route sent it
// (percent-decoded), and the query string's as_of, include_closed and edges.
type entityCall struct {
	namespace, name            string
	asOf, includeClosed, edges string
}

// entity is the entity read (GET .../graph/entities/{name}).
func (s *Service) entity(ctx context.Context, p auth.Principal, r entityCall) (*entityAnswer, error) {
	g, err := s.graphReadOf(p, r)
	if err != nil {
		return nil, err
	}
	passed, err := s.barrier.Wait(ctx, p.Org, []string{r.namespace})
	if err != nil {
		return nil, err
	}
	ans, err := s.readEntity(ctx, g)
	if err != nil {
		return nil, chUnavailable("reading the entity graph", err)
	}
	if ans == nil {
		return nil, httperr.NotFound("no such entity in the namespace")
	}
	ans.Barrier, ans.AsOf = passed, g.asOf
	return ans, nil
}

// graphReadOf checks an entity read's name and options.
func (s *Service) graphReadOf(p auth.Principal, r entityCall) (graphRead, error) {
	g := graphRead{org: p.Org, namespace: r.namespace, name: memrow.EntityName(r.name), userID: p.ReadUserID, edges: 10, now: s.now()}
	if g.name == "" {
		return g, httperr.Validation("name", "an entity name has a word in it")
	}
	if r.asOf != "" {
		at, err := time.Parse(time.RFC3339Nano, r.asOf)
		if err != nil {
			return g, httperr.Validation("as_of", "as_of must be an RFC 3339 time")
		}
		g.asOf = &at
	}
	var err error
	if r.includeClosed != "" {
		if g.includeClosed, err = strconv.ParseBool(r.includeClosed); err != nil {
			return g, httperr.Validation("include_closed", "include_closed must be true or false")
		}
	}
	if r.edges != "" {
		if g.edges, err = strconv.Atoi(r.edges); err != nil || g.edges < 0 || g.edges > maxEdges {
			return g, httperr.Validation("edges", fmt.Sprintf("edges must be 0 to %d", maxEdges))
		}
	}
	return g, nil
}

// readEntity answers the entity, or nil when the namespace (within the token's read
// scope) never named it.
func (s *Service) readEntity(ctx context.Context, g graphRead) (*entityAnswer, error) {
	ctx = s.ch.Ctx(ctx)
	ans := &entityAnswer{Namespace: g.namespace, Name: g.name, Aliases: []string{}, Facts: []factView{}, Edges: []edgeView{}}
	rows, err := s.ch.Query(ctx, `SELECT alias, entity_type, user_id, seq FROM loom.entities FINAL
		PREWHERE org = ? AND namespace = ? AND name = ? ORDER BY seq`, g.org, g.namespace, g.name)
	if err != nil {
		return nil, fmt.Errorf("read the entity: %w", err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var alias, typ, user string
		var seq uint64
		if err := rows.Scan(&alias, &typ, &user, &seq); err != nil {
			rows.Close()
			return nil, err
		}
		if g.userID != "" && user != g.userID {
			continue
		}
		if !seen[alias] {
			seen[alias] = true
			ans.Aliases = append(ans.Aliases, alias)
		}
		if typ != "" {
			ans.Type = typ // rows come oldest first: the latest declared type stays
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(ans.Aliases) == 0 {
		return nil, nil
	}
	sort.Strings(ans.Aliases)
	if ans.Facts, err = s.entityFacts(ctx, g); err != nil {
		return nil, err
	}
	if ans.Edges, err = s.entityEdges(ctx, g); err != nil {
		return nil, err
	}
	if g.userID == "" && g.asOf == nil {
		if ans.Community, err = communities.Read(ctx, s.pool, g.org, g.namespace, g.name, maxCommunityMembers); err != nil {
			return nil, err
		}
	}
	return ans, nil
}

// entityFacts reads the current version of every observation naming the entity, and
// the rows that stated each.
func (s *Service) entityFacts(ctx context.Context, g graphRead) ([]factView, error) {
	rows, err := s.ch.Query(ctx, `SELECT subject, predicate, object, observed_seq, argMax(cardinality, seq),
			argMax(valid_from, seq), argMax(valid_to, seq), argMax(invalid_at, seq), argMax(seen_at, seq), argMax(restored, seq),
			argMax(fallback, seq)
		FROM loom.entity_triples PREWHERE org = ? AND namespace = ? WHERE subject = ? OR object = ?
		GROUP BY subject, predicate, object, observed_seq`, g.org, g.namespace, g.name, g.name)
	if err != nil {
		return nil, fmt.Errorf("read facts: %w", err)
	}
	type obsID struct {
		s, p, o string
		seq     uint64
	}
	byObs := map[obsID]*factView{}
	var facts []*factView
	for rows.Next() {
		f := &factView{Rows: []factRowRef{}}
		var restored, fallback uint8
		if err := rows.Scan(&f.Subject, &f.Predicate, &f.Object, &f.observedSeq, &f.Cardinality, &f.ValidFrom, &f.ValidTo,
			&f.InvalidAt, &f.SeenAt, &restored, &fallback); err != nil {
			rows.Close()
			return nil, err
		}
		f.Restored, f.Fallback = restored == 1, fallback == 1
		f.ValidFrom, f.SeenAt = f.ValidFrom.UTC(), f.SeenAt.UTC()
		f.ValidTo, f.InvalidAt = utcPtr(f.ValidTo), utcPtr(f.InvalidAt)
		if !g.holds(f.ValidFrom, f.ValidTo) {
			continue
		}
		f.Open = g.open(f.ValidTo)
		byObs[obsID{f.Subject, f.Predicate, f.Object, f.observedSeq}] = f
		facts = append(facts, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	links, err := s.ch.Query(ctx, `SELECT subject, predicate, object, toString(memory_id), argMax(observed_seq, seq),
			argMax(holds, seq), argMax(memory_key, seq), argMax(agent, seq), argMax(user_id, seq), argMax(session_id, seq)
		FROM loom.entity_triple_rows PREWHERE org = ? AND namespace = ? WHERE subject = ? OR object = ?
		GROUP BY subject, predicate, object, memory_id`, g.org, g.namespace, g.name, g.name)
	if err != nil {
		return nil, fmt.Errorf("read fact rows: %w", err)
	}
	for links.Next() {
		var id obsID
		var r factRowRef
		var holds uint8
		if err := links.Scan(&id.s, &id.p, &id.o, &r.MemoryID, &id.seq, &holds, &r.MemoryKey, &r.Agent, &r.UserID, &r.SessionID); err != nil {
			links.Close()
			return nil, err
		}
		r.Holds = holds == 1
		if f := byObs[id]; f != nil && (g.userID == "" || r.UserID == g.userID) {
			f.Rows = append(f.Rows, r)
		}
	}
	links.Close()
	if err := links.Err(); err != nil {
		return nil, err
	}
	out := []factView{}
	for _, f := range facts {
		if g.userID != "" && len(f.Rows) == 0 {
			continue // no row of the token's user stated it
		}
		sort.Slice(f.Rows, func(i, j int) bool { return f.Rows[i].MemoryID < f.Rows[j].MemoryID })
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Predicate != b.Predicate {
			return a.Predicate < b.Predicate
		}
		if !a.ValidFrom.Equal(b.ValidFrom) {
			return a.ValidFrom.Before(b.ValidFrom)
		}
		return a.observedSeq < b.observedSeq
	})
	return out, nil
}

// entityEdges reads the entity's edges, strongest first. For a token bound to one
// user, an edge weighs the rows of that user that named both entities.
func (s *Service) entityEdges(ctx context.Context, g graphRead) ([]edgeView, error) {
	out := []edgeView{}
	if g.edges == 0 {
		return out, nil
	}
	rows, err := s.ch.Query(ctx, `SELECT entity_a, entity_b, opened_seq, argMax(valid_from, seq), argMax(valid_to, seq),
			argMax(weight, seq)
		FROM loom.entity_edges PREWHERE org = ? AND namespace = ? WHERE entity_a = ? OR entity_b = ?
		GROUP BY entity_a, entity_b, opened_seq`, g.org, g.namespace, g.name, g.name)
	if err != nil {
		return nil, fmt.Errorf("read edges: %w", err)
	}
	latest := map[string]uint64{} // an entity's latest interval with this one
	var all []edgeView
	var opened []uint64
	for rows.Next() {
		var a, b string
		var e edgeView
		var seq uint64
		if err := rows.Scan(&a, &b, &seq, &e.ValidFrom, &e.ValidTo, &e.Weight); err != nil {
			rows.Close()
			return nil, err
		}
		e.Entity = b
		if b == g.name {
			e.Entity = a
		}
		e.ValidFrom, e.ValidTo = e.ValidFrom.UTC(), utcPtr(e.ValidTo)
		if !g.holds(e.ValidFrom, e.ValidTo) {
			continue
		}
		e.Open = g.open(e.ValidTo)
		all, opened = append(all, e), append(opened, seq)
		latest[e.Entity] = max(latest[e.Entity], seq)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var weights map[string]uint32
	if g.userID != "" {
		if weights, err = s.userEdgeWeights(ctx, g); err != nil {
			return nil, err
		}
	}
	for i, e := range all {
		if opened[i] != latest[e.Entity] && !g.includeClosed {
			continue // an older interval of the same pair: history
		}
		if weights != nil {
			if e.Weight = weights[e.Entity]; e.Weight == 0 {
				continue
			}
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Weight != out[j].Weight {
			return out[i].Weight > out[j].Weight
		}
		if out[i].Entity != out[j].Entity {
			return out[i].Entity < out[j].Entity
		}
		return out[i].ValidFrom.Before(out[j].ValidFrom)
	})
	if len(out) > g.edges {
		out = out[:g.edges]
	}
	return out, nil
}

// userEdgeWeights counts, per entity paired with g's, the rows of g's user that ever
// named both.
func (s *Service) userEdgeWeights(ctx context.Context, g graphRead) (map[string]uint32, error) {
	rows, err := s.ch.Query(ctx, `SELECT if(entity_a = ?, entity_b, entity_a) AS other, uniqExact(memory_id)
		FROM loom.entity_edge_rows PREWHERE org = ? AND namespace = ? WHERE (entity_a = ? OR entity_b = ?) AND user_id = ?
		GROUP BY other`, g.name, g.org, g.namespace, g.name, g.name, g.userID)
	if err != nil {
		return nil, fmt.Errorf("read the user's edge rows: %w", err)
	}
	defer rows.Close()
	out := map[string]uint32{}
	for rows.Next() {
		var other string
		var n uint64
		if err := rows.Scan(&other, &n); err != nil {
			return nil, err
		}
		out[other] = uint32(n)
	}
	return out, rows.Err()
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
