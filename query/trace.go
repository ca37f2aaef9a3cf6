package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/rowseal"
)

// searchTrace is memory.search_trace: everything one search did, kept when the
// request asks (trace: true) and read back by id for LOOM_SEARCH_TRACE_TTL_S. It is
// kept in Postgres (loom.search_traces), not in the process that ran the search, since
// any query process may serve the read; it holds identities, scores and the query,
// never a memory's value, and an erasure deletes the traces naming its scope.
type searchTrace struct {
	mu         sync.Mutex
	Query      string            `json:"query"`
	Namespaces []string          `json:"namespaces"`
	Settings   retrievalSettings `json:"settings"`
	Plan       queryPlan         `json:"plan"`
	// Legs are each leg's pool, per query searched (the whole query, then each part).
	Legs []traceLeg `json:"legs"`
	// Fusion is the fused pool, best first, with every score that ranked it.
	Fusion     []traceCandidate `json:"fusion"`
	Background background       `json:"background"`
	Drops      []traceDrop      `json:"validation_drops"`
	Served     []traceCandidate `json:"served"`
	Gates      []gate           `json:"gates"`
	Grounding  grounding        `json:"grounding"`
	Rerank     rerankOutcome    `json:"rerank"`
	Verdict    Verdict          `json:"verdict"`
	// AsOf is an as_of replay's time: its trace is read back as kept (trace_recheck.go).
	AsOf *time.Time `json:"as_of,omitempty"`
	// MemoryType is the type the search was narrowed to: a hidden type it did not name
	// (a reflection) is left out of the trace read back, as the search left it out.
	MemoryType string `json:"memory_type,omitempty"`
}

type traceLeg struct {
	Query string     `json:"query"`
	Leg   Leg        `json:"leg"`
	Hits  []traceHit `json:"hits"`
}

type traceHit struct {
	ID    memrow.Identity `json:"id"`
	Score float64         `json:"score"`
}

type traceCandidate struct {
	ID     memrow.Identity    `json:"id"`
	Fused  float64            `json:"fused"`
	Score  float64            `json:"score,omitempty"`
	Scores map[string]float64 `json:"scores"`
}

type traceDrop struct {
	ID     memrow.Identity `json:"id"`
	Reason string          `json:"reason"` // gone, content_changed, type_changed, filtered
}

// maxTraceFusion bounds the fused pool a trace keeps.
const maxTraceFusion = 500

// The recording methods do nothing on a nil trace (a search that keeps none).

func (t *searchTrace) legs(query string, legs map[Leg][]legHit) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make([]Leg, 0, len(legs))
	for l := range legs {
		names = append(names, l)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, l := range names {
		tl := traceLeg{Query: query, Leg: l, Hits: []traceHit{}}
		for _, h := range legs[l] {
			tl.Hits = append(tl.Hits, traceHit{ID: h.id, Score: round6(h.score)})
		}
		sort.SliceStable(tl.Hits, func(i, j int) bool { return tl.Hits[i].Score > tl.Hits[j].Score })
		t.Legs = append(t.Legs, tl)
	}
}

func (t *searchTrace) fusion(pool []*candidate) {
	if t == nil {
		return
	}
	t.Fusion = []traceCandidate{}
	for _, c := range pool[:min(len(pool), maxTraceFusion)] {
		sc := map[string]float64{"relevance": round6(c.relevance), "lexical_coverage": round6(c.coverage)}
		c.scores.each(func(l Leg, v float64) { sc[string(l)] = round6(v) })
		t.Fusion = append(t.Fusion, traceCandidate{ID: c.identity, Fused: round6(c.fused), Scores: sc})
	}
}

func (t *searchTrace) drop(c *candidate, reason string) {
	if t != nil {
		t.Drops = append(t.Drops, traceDrop{ID: c.identity, Reason: reason})
	}
}

func (t *searchTrace) served(hits []hitView) {
	if t == nil {
		return
	}
	t.Served = []traceCandidate{}
	for _, h := range hits {
		t.Served = append(t.Served, traceCandidate{ID: memrow.Identity{Namespace: h.Namespace, Agent: h.Agent, UserID: h.UserID,
			SessionID: h.SessionID, MemoryKey: h.MemoryKey}, Fused: h.Scores["fused"], Score: h.Score, Scores: h.Scores})
	}
}

// identities are the memory identities the trace names, in loom.search_pages's
// shape, for an erasure's scope.
func (t *searchTrace) identities() []map[string]memrow.Identity {
	seen := map[memrow.Identity]bool{}
	var out []map[string]memrow.Identity
	add := func(id memrow.Identity) {
		id.Org = ""
		if !seen[id] {
			seen[id] = true
			out = append(out, map[string]memrow.Identity{"id": id})
		}
	}
	for _, l := range t.Legs {
		for _, h := range l.Hits {
			add(h.ID)
		}
	}
	for _, list := range [][]traceCandidate{t.Fusion, t.Served} {
		for _, c := range list {
			add(c.ID)
		}
	}
	for _, d := range t.Drops {
		add(d.ID)
	}
	if out == nil {
		out = []map[string]memrow.Identity{}
	}
	return out
}

// keepTrace stores a search's trace and answers its id; expired traces are deleted
// in the same round trip.
func (s *Service) keepTrace(ctx context.Context, org, userID, sessionID string, t *searchTrace) (string, error) {
	rows, err := json.Marshal(t.identities())
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	// The trace names its user by reference (loom.named_user): the org's key first.
	if _, err := s.termKeys.Key(ctx, org); err != nil {
		return "", err
	}
	// The trace is sealed under a key of its row's own (migration 156), and its rows
	// name their users by reference, for the erasure's containment test, and not their
	// keys, agents or sessions (which the sealed trace holds; migrations 171, 173).
	key, storedKey, err := kek.NewKey(s.kek)
	if err != nil {
		return "", err
	}
	sealed, err := rowseal.Seal(key, rowseal.LabelTrace, body)
	if err != nil {
		return "", err
	}
	id := uuid.New()
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO loom.search_traces (id, org, namespaces, user_id, session_id, rows, trace, expires_at, data_key, sealed)
		VALUES ($1, $2, $3, loom.named_user($2, $4), (SELECT loom.session_ref($2, $5)),
			(SELECT coalesce(jsonb_agg(jsonb_build_object('id', ((e -> 'id') - 'user_id' - 'memory_key' - 'agent' - 'session_id') || jsonb_build_object('user_ref',
				loom.user_ref($2, e #>> '{id,user_id}')))), '[]') FROM jsonb_array_elements($6::jsonb) e),
			'{}', now() + $7::interval, $8, $9)`,
		id, org, t.Namespaces, userID, sessionID, rows, s.cfg.Retrieval.TraceTTL.String(), storedKey, sealed)
	b.Queue(`DELETE FROM loom.search_traces WHERE ctid IN (SELECT ctid FROM loom.search_traces WHERE expires_at < now() LIMIT 100)`)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return "", fmt.Errorf("keep the search trace: %w", err)
	}
	return id.String(), nil
}

// traceAnswer is memory.search_trace's answer.
type traceAnswer struct {
	TraceID   string          `json:"trace_id"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
	Trace     json.RawMessage `json:"trace"`
	// StaleDropped counts the memories the trace named that the authority no longer
	// serves, left out of it (trace_recheck.go).
	StaleDropped int `json:"stale_dropped"`
}

// searchTraceOf is memory.search_trace: a kept trace, to a token of its org that
// reaches every namespace it searched, under the same read scope: a token bound to a
// user or a session reads the traces of searches narrowed to it alone.
func (s *Service) searchTraceOf(ctx context.Context, p auth.Principal, traceID string) (*traceAnswer, error) {
	id, err := uuid.Parse(traceID)
	if err != nil {
		return nil, httperr.NotFound("the search trace is unknown or expired")
	}
	var a traceAnswer
	var namespaces []string
	var userID, sessionRef, boundRef string
	var storedKey, sealed []byte
	// The trace names its session by reference (migration 176): a token bound to a
	// session reads it when its session's reference is the trace's.
	err = s.pool.QueryRow(ctx, `SELECT namespaces, loom.user_name(org, user_id), session_id, coalesce((SELECT loom.session_ref($2, $3)), ''),
			trace, created_at, expires_at, data_key, sealed
		FROM loom.search_traces WHERE id = $1 AND org = $2 AND expires_at > now()`, id, p.Org, p.ReadSessionID).
		Scan(&namespaces, &userID, &sessionRef, &boundRef, &a.Trace, &a.CreatedAt, &a.ExpiresAt, &storedKey, &sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, httperr.NotFound("the search trace is unknown or expired")
	}
	if err != nil {
		return nil, httperr.Store("reading the search trace", err)
	}
	if sealed != nil { // kept before migration 156: plain
		key, err := kek.OpenKey(s.kek, storedKey)
		if err != nil {
			return nil, fmt.Errorf("open the search trace's key: %w", err)
		}
		if a.Trace, err = rowseal.Open(key, rowseal.LabelTrace, sealed); err != nil {
			return nil, fmt.Errorf("open the search trace: %w", err)
		}
	}
	if scopedUser(p, userID) != userID || (p.ReadSessionID != "" && sessionRef != boundRef) {
		return nil, httperr.NotFound("the search trace is unknown or expired")
	}
	for _, ns := range namespaces {
		if p.Namespace(ns) != nil {
			return nil, httperr.NotFound("the search trace is unknown or expired")
		}
	}
	a.TraceID = id.String()
	if a.Trace, a.StaleDropped, err = s.recheckTrace(ctx, p.Org, namespaces, a.Trace); err != nil {
		return nil, err
	}
	return &a, nil
}
