package query

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
	"github.com/loomplane/loom/internal/text"
)

// memory.recall (POST /v1/namespaces/{ns}/memories:recall) reads the conversation's
// record (internal/evidence): by key or memory id, the turns a memory was drawn from;
// by query, the kept turns that answer it, best first. Each hit comes with its
// neighbour window: up to window turns either side of it in its session. It reads the
// authority directly (the turns are committed rows, not a projection), so a turn is
// recallable as soon as its write answered. A token bound to one user recalls that
// user's turns alone.

// Bounds of a recall.
const (
	defaultRecallWindow = 2
	maxRecallWindow     = 20
	defaultRecallTopK   = 5
	maxRecallTopK       = 50
	// recallScanTurns is how many of the scope's most recent turns a query is matched
	// against.
	recallScanTurns = 5000
)

// recallRequest is memory.recall's body: exactly one of key, memory_id and query.
type recallRequest struct {
	Key       string `json:"key,omitempty"`
	MemoryID  string `json:"memory_id,omitempty"`
	Query     string `json:"query,omitempty"`
	Agent     string `json:"agent,omitempty"`
	UserID    string `json:"user_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	Window    *int   `json:"window,omitempty"`
	TopK      *int   `json:"top_k,omitempty"`
}

// Turn is one turn of a conversation as Loom kept it.
type Turn struct {
	ID         string    `json:"turn_id"`
	SessionID  string    `json:"session_id"`
	Agent      string    `json:"agent"`
	UserID     string    `json:"user_id"`
	Role       string    `json:"role"`
	Speaker    string    `json:"speaker,omitempty"`
	Index      int       `json:"message_index"`
	OccurredAt time.Time `json:"occurred_at"`
	Text       string    `json:"text"`
}

// recallHit is a recalled turn with its neighbours.
type recallHit struct {
	Turn
	Score  float64 `json:"score,omitempty"` // a query's lexical score
	Window []Turn  `json:"window"`          // the session's turns around it, it included, oldest first
}

type recallAnswer struct {
	Namespace string      `json:"namespace"`
	MemoryID  string      `json:"memory_id,omitempty"`
	Key       string      `json:"key,omitempty"`
	Query     string      `json:"query,omitempty"`
	Hits      []recallHit `json:"hits"`
}

func turnOf(o evidence.Opened) Turn {
	return Turn{ID: o.TurnID, SessionID: o.SessionID, Agent: o.Agent, UserID: o.UserID, Role: o.Role, Speaker: o.Speaker,
		Index: o.MessageIndex, OccurredAt: o.OccurredAt.UTC(), Text: o.Text}
}

// checkRecall validates a request and answers its window and top_k.
func checkRecall(req *recallRequest) (window, topK int, err error) {
	given := 0
	for _, v := range []string{req.Key, req.MemoryID, req.Query} {
		if strings.TrimSpace(v) != "" {
			given++
		}
	}
	if given != 1 {
		return 0, 0, httperr.Validation("query", "give exactly one of key, memory_id and query")
	}
	if req.MemoryID != "" {
		if _, err := uuid.Parse(req.MemoryID); err != nil {
			return 0, 0, httperr.Validation("memory_id", "memory_id is a UUID")
		}
	}
	if req.Key != "" {
		if err := memrow.ValidateKey(req.Key); err != nil {
			return 0, 0, err
		}
	}
	window, topK = defaultRecallWindow, defaultRecallTopK
	if req.Window != nil {
		if window = *req.Window; window < 0 || window > maxRecallWindow {
			return 0, 0, httperr.Validation("window", fmt.Sprintf("window must be 0 to %d turns", maxRecallWindow))
		}
	}
	if req.TopK != nil {
		if topK = *req.TopK; topK < 1 || topK > maxRecallTopK {
			return 0, 0, httperr.Validation("top_k", fmt.Sprintf("top_k must be 1 to %d", maxRecallTopK))
		}
	}
	return window, topK, nil
}

// recall is memory.recall.
func (s *Service) recall(ctx context.Context, p auth.Principal, ns string, req *recallRequest) (*recallAnswer, error) {
	if err := p.Namespace(ns); err != nil {
		return nil, err
	}
	window, topK, err := checkRecall(req)
	if err != nil {
		return nil, err
	}
	if req.UserID != "" {
		if err := p.RequireUser(req.UserID, "memory.recall"); err != nil {
			return nil, err
		}
	}
	scope := evidence.Scope{Org: p.Org, Namespace: ns, UserID: p.ReadUserID}
	if req.UserID != "" {
		scope.UserID = req.UserID
	}
	ans := &recallAnswer{Namespace: ns, Key: req.Key, Query: req.Query, Hits: []recallHit{}}
	var found []evidence.Candidate
	var scores map[string]float64
	switch {
	case req.Query != "":
		found, scores, err = s.matchTurns(ctx, scope, req.Query, topK)
	default:
		ans.MemoryID, err = s.recalledMemory(ctx, p, ns, req)
		if err == nil {
			var by map[string][]evidence.Opened
			by, err = evidence.SourcesOf(ctx, s.pool, scope, []string{ans.MemoryID})
			sources := by[ans.MemoryID]
			sort.Slice(sources, func(i, j int) bool {
				if !sources[i].OccurredAt.Equal(sources[j].OccurredAt) {
					return sources[i].OccurredAt.Before(sources[j].OccurredAt)
				}
				return sources[i].MessageIndex < sources[j].MessageIndex
			})
			for i := range sources {
				o := &sources[i]
				found = append(found, evidence.Candidate{TurnID: o.TurnID, UserID: o.UserID, SessionRef: o.SessionRef,
					MessageIndex: o.MessageIndex, OccurredAt: o.OccurredAt, Opened: o})
			}
		}
	}
	if err != nil {
		return nil, err
	}
	// One read opens every hit's window, the hit among it: a question's hits are opened
	// there and nowhere else.
	spans := make([]evidence.Span, len(found))
	for i, c := range found {
		spans[i] = evidence.Span{UserID: c.UserID, SessionRef: c.SessionRef, From: c.MessageIndex - window, To: c.MessageIndex + window}
	}
	windows, err := evidence.Spans(ctx, s.pool, p.Org, ns, spans, s.unwrapKey)
	if err != nil {
		return nil, httperr.Store("reading the turns around the recalled ones", err)
	}
	for i, c := range found {
		h := recallHit{Score: scores[c.TurnID], Window: make([]Turn, len(windows[i]))}
		for j, n := range windows[i] {
			h.Window[j] = turnOf(n)
			if n.TurnID == c.TurnID {
				h.Turn = h.Window[j]
			}
		}
		if c.Opened != nil {
			h.Turn = turnOf(*c.Opened)
		}
		if h.Turn.ID == "" {
			continue // gone since it matched: an erasure or a redaction took it
		}
		ans.Hits = append(ans.Hits, h)
	}
	return ans, nil
}

// recalledMemory is the memory id a request names by key (its head, of the identity
// the request gives) or by id (a head the token reaches); not found when it has none.
func (s *Service) recalledMemory(ctx context.Context, p auth.Principal, ns string, req *recallRequest) (string, error) {
	if req.MemoryID != "" {
		withID, err := heads.WithID(ctx, s.pool, p.Org, req.MemoryID)
		if err != nil {
			return "", httperr.Store("reading heads by id", err)
		}
		row := heads.OneByID(withID, s.now(), func(n string) bool { return n == ns && p.Reaches(n) }, p.ReadUserID)
		if row == nil {
			return "", httperr.NotFound("memory not found")
		}
		return row.MemoryID, nil
	}
	id, other := route.Identity(p, ns, req.Key, route.Names{Agent: req.Agent, UserID: req.UserID, SessionID: req.SessionID})
	if other {
		return "", httperr.NotFound("memory not found")
	}
	row, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return "", httperr.Store("reading the head", err)
	}
	if row == nil || !row.Live(s.now()) {
		return "", httperr.NotFound("memory not found")
	}
	return row.MemoryID, nil
}

// matchTurns scores the scope's recent turns against a query by the words they
// share, each weighted by its rarity among them (BM25's idf), and answers the best
// topK, newest first on a tie. It opens none of them: Postgres reads the turns whose
// blind index of terms (evidence.TermHashes) overlaps the query's, and they are scored
// by their hashes; the served turns are opened with their windows. A turn kept before
// the index comes opened and is matched by its text.
func (s *Service) matchTurns(ctx context.Context, scope evidence.Scope, query string, topK int) ([]evidence.Candidate, map[string]float64, error) {
	if len(text.Terms(query)) == 0 {
		return nil, nil, httperr.Validation("query", "the query has no words to match")
	}
	orgKey, err := s.termKeys.Key(ctx, scope.Org)
	if err != nil {
		return nil, nil, httperr.Store("reading the org's term key", err)
	}
	termKey := evidence.TermKey(orgKey)
	want := evidence.TermHashes(termKey, query)
	found, scanned, err := evidence.Candidates(ctx, s.pool, scope, recallScanTurns, want, s.unwrapKey)
	if err != nil {
		return nil, nil, httperr.Store("reading the conversation's turns", err)
	}
	asked := make(map[int64]bool, len(want))
	for _, h := range want {
		asked[h] = true
	}
	has := make([][]int64, len(found))
	df := map[int64]int{}
	for i, c := range found {
		terms := c.Terms
		if c.Opened != nil {
			terms = evidence.TermHashes(termKey, c.Opened.Text)
		}
		for _, h := range terms {
			if asked[h] {
				has[i] = append(has[i], h)
				df[h]++
			}
		}
	}
	type scored struct {
		i     int
		score float64
	}
	var hits []scored
	n := float64(scanned)
	for i := range found {
		var sc float64
		for _, h := range has[i] {
			sc += math.Log(1 + (n-float64(df[h])+0.5)/(float64(df[h])+0.5))
		}
		if sc > 0 {
			hits = append(hits, scored{i, sc})
		}
	}
	sort.SliceStable(hits, func(a, b int) bool { return hits[a].score > hits[b].score })
	if len(hits) > topK {
		hits = hits[:topK]
	}
	out := make([]evidence.Candidate, len(hits))
	scores := make(map[string]float64, len(hits))
	for j, h := range hits {
		out[j] = found[h.i]
		scores[found[h.i].TurnID] = math.Round(h.score*1000) / 1000
	}
	return out, scores, nil
}

// SessionTurns reads the last n turns of a session, oldest first: every user's of it,
// or the bound user's alone for a token bound to one user; none for a token bound to
// another session. context.pack reads it.
func (s *Service) SessionTurns(ctx context.Context, p auth.Principal, namespace, sessionID string, last int) ([]Turn, error) {
	if err := p.Namespace(namespace); err != nil {
		return nil, err
	}
	if last <= 0 || !p.InSession(sessionID) {
		return []Turn{}, nil
	}
	rows, err := evidence.Last(ctx, s.pool, evidence.Scope{Org: p.Org, Namespace: namespace, UserID: p.ReadUserID}, sessionID, last)
	if err != nil {
		return nil, httperr.Store("reading the session's turns", err)
	}
	out := make([]Turn, len(rows))
	for i, o := range rows {
		out[i] = turnOf(o)
	}
	return out, nil
}
