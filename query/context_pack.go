package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/revisions"
)

// Defaults and ceilings of a pack's request.
const (
	packBudgetDefault     = 2000
	packTopKDefault       = 10
	packTopKMax           = 50
	packRecentDefault     = 5
	packRecentMax         = 50
	packTurnsDefault      = 8
	packTurnsMax          = 100
	packPerKeyDefault     = 2
	packPerSessionDefault = 12
	packCapMax            = 1000
)

// packRequest is the body of POST /v1/namespaces/{ns}/context:pack and :stack.
type packRequest struct {
	// Query is what the facts layer searches for; without one that layer is empty.
	Query     string `json:"query"`
	Agent     string `json:"agent"`
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
	// BudgetTokens bounds the block, counted by Tokenizer, or by Model's encoding.
	BudgetTokens *int64   `json:"budget_tokens"`
	Tokenizer    string   `json:"tokenizer"`
	Model        string   `json:"model"`
	Sections     []string `json:"sections"`
	Format       string   `json:"format"`
	PerKey       *int     `json:"per_key"`
	PerSession   *int     `json:"per_session"`
	TopK         *int     `json:"top_k"`
	Recent       *int     `json:"recent"`
	LastTurns    *int     `json:"last_turns"`
}

// packAnswer is what context.pack answers: the block, what it holds layer by layer,
// and what was cut. Nothing in it depends on when it was asked, only on the state it
// read, so the same state gives the same bytes.
type packAnswer struct {
	Namespace string        `json:"namespace"`
	Format    string        `json:"format"`
	Block     string        `json:"block"`
	Tokens    int           `json:"tokens"`
	Budget    int           `json:"budget_tokens"`
	Tokenizer packTokenizer `json:"tokenizer"`
	Priority  []string      `json:"priority"`
	Sections  []packSection `json:"sections"`
	Cut       []packCut     `json:"cut"`
	// Citations are every citation the block holds, each once, in the block's order.
	Citations []string `json:"citations"`
	Barrier   Passed   `json:"barrier"`
}

// packPlan is a pack's request settled.
type packPlan struct {
	req       *packRequest
	ns        string
	userID    string // the read scope's user ("" every user's; noUser none)
	tok       packTokenizer
	lim       packLimits
	sections  []string // asked, in priority order
	format    string
	topK      int
	recent    int
	lastTurns int
}

// contextPack is context.pack: the layers read, cut to the budget and rendered.
func (s *Service) contextPack(ctx context.Context, p auth.Principal, ns string, req *packRequest) (*packAnswer, error) {
	plan, err := settlePack(p, ns, req, s.tokenizers)
	if err != nil {
		return nil, err
	}
	layers, passed, err := s.packLayers(ctx, p, plan)
	if err != nil {
		return nil, err
	}
	kept, cuts, block, tokens := fitPack(layers, plan.lim, plan.format, plan.tok.Count)
	if cuts == nil {
		cuts = []packCut{}
	}
	return &packAnswer{Namespace: ns, Format: plan.format, Block: block, Tokens: tokens, Budget: plan.lim.Budget, Tokenizer: plan.tok,
		Priority: plan.sections, Sections: kept, Cut: cuts, Citations: packCitations(kept), Barrier: stateOf(passed)}, nil
}

// packCitations are the kept lines' citations, each once, in order.
func packCitations(sections []packSection) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, sec := range sections {
		for _, l := range sec.Lines {
			if !seen[l.Cite] {
				seen[l.Cite] = true
				out = append(out, l.Cite)
			}
		}
	}
	return out
}

// settlePack checks a pack's request, field by field, and fills its defaults.
func settlePack(p auth.Principal, ns string, req *packRequest, tz *tokenizers) (*packPlan, error) {
	if err := p.Namespace(ns); err != nil {
		return nil, err
	}
	if n := len([]rune(req.Query)); n > maxQueryChars {
		return nil, httperr.Validation("query", fmt.Sprintf("query has %d characters; at most %d", n, maxQueryChars))
	}
	for _, f := range []struct{ name, v string }{{"agent", req.Agent}, {"user_id", req.UserID}, {"session_id", req.SessionID}} {
		if f.v != "" {
			if err := memrow.ValidateIdentity(f.name, f.v); err != nil {
				return nil, err
			}
		}
	}
	plan := &packPlan{req: req, ns: ns, userID: scopedUser(p, req.UserID), format: formatMarkdown}
	budget := int64(packBudgetDefault)
	if req.BudgetTokens != nil {
		budget = *req.BudgetTokens
	}
	if budget < minPackBudget || budget > maxPackBudget {
		return nil, budgetRefused()
	}
	tok, err := tz.For(req.Tokenizer, req.Model)
	if err != nil {
		return nil, err
	}
	plan.tok = tok
	switch req.Format {
	case "", formatMarkdown:
	case formatJSON:
		plan.format = formatJSON
	default:
		return nil, httperr.Validation("format", "format must be markdown or json")
	}
	if len(req.Sections) == 0 {
		plan.sections = packPriority
	} else {
		for _, name := range req.Sections {
			if !slices.Contains(packPriority, name) {
				return nil, httperr.Validation("sections", fmt.Sprintf("unknown section %q; sections are %s", name, strings.Join(packPriority, ", ")))
			}
		}
		for _, name := range packPriority {
			if slices.Contains(req.Sections, name) {
				plan.sections = append(plan.sections, name)
			}
		}
	}
	ints := []struct {
		name     string
		v        *int
		def, max int
		into     *int
	}{
		{"per_key", req.PerKey, packPerKeyDefault, packCapMax, &plan.lim.PerKey},
		{"per_session", req.PerSession, packPerSessionDefault, packCapMax, &plan.lim.PerSession},
		{"top_k", req.TopK, packTopKDefault, packTopKMax, &plan.topK},
		{"recent", req.Recent, packRecentDefault, packRecentMax, &plan.recent},
		{"last_turns", req.LastTurns, packTurnsDefault, packTurnsMax, &plan.lastTurns},
	}
	for _, f := range ints {
		*f.into = f.def
		if f.v == nil {
			continue
		}
		if *f.v < 0 || *f.v > f.max {
			return nil, httperr.Validation(f.name, fmt.Sprintf("%s must be an integer from 0 to %d", f.name, f.max))
		}
		*f.into = *f.v
	}
	plan.lim.Budget = int(budget)
	return plan, nil
}

// stateOf is the barrier as a pack answers it: the generations its facts were read at,
// and no wait (waited_ms 0), which differs from call to call of the same state; the
// wait is in loom_search_seconds.
func stateOf(p Passed) Passed {
	return Passed{Generations: p.Generations}
}

// budgetRefused is a budget out of range, or no integer.
func budgetRefused() *httperr.Error {
	return httperr.Validation("budget_tokens", fmt.Sprintf("budget_tokens must be an integer from %d to %d", minPackBudget, maxPackBudget))
}

// packLayers reads every asked layer, each line cited. The layers read apart (the
// search's index and barrier, the journal, the conversation's record, the knowledge
// plane) and share nothing, so they are read at once: a pack costs its slowest layer,
// not their sum. Each fills its own section, so the answer does not depend on which
// finishes first.
func (s *Service) packLayers(ctx context.Context, p auth.Principal, plan *packPlan) ([]packSection, Passed, error) {
	var passed Passed
	out := make([]packSection, len(plan.sections))
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range plan.sections {
		out[i] = packSection{Name: name, Available: true, Lines: []packLine{}}
		sec := &out[i]
		g.Go(func() error {
			switch name {
			case sectionProfile:
				return s.profileLayer(gctx, p, plan, sec)
			case sectionFacts:
				var err error
				passed, err = s.factsLayer(gctx, p, plan, sec)
				return err
			case sectionRecent:
				return s.recentLayer(gctx, p, plan, sec)
			case sectionSession:
				return s.sessionLayer(gctx, p, plan, sec)
			case sectionKnowledge:
				return s.knowledgeLayer(gctx, p, plan, sec)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, Passed{}, err
	}
	return out, passed, nil
}

func (s *Service) profileLayer(ctx context.Context, p auth.Principal, plan *packPlan, sec *packSection) error {
	if s.profiles == nil {
		sec.Available, sec.Note = false, "profiles not available"
		return nil
	}
	if plan.userID == "" || plan.userID == noUser {
		sec.Note = "no user_id given"
		return nil
	}
	lines, ok, err := s.profiles.Profile(ctx, p, plan.ns, plan.userID)
	if err != nil {
		return fmt.Errorf("reading the profile: %w", err)
	}
	if !ok {
		sec.Note = "the user has no profile"
	}
	for _, l := range lines {
		sec.Lines = append(sec.Lines, packLine{Cite: l.Cite, Text: l.Text, detail: l})
	}
	return nil
}

// factsLayer is the search's page for the query, every hit checked against its head
// behind the barrier as a search checks it.
func (s *Service) factsLayer(ctx context.Context, p auth.Principal, plan *packPlan, sec *packSection) (Passed, error) {
	if plan.req.Query == "" {
		sec.Note = "no query given"
		return Passed{}, nil
	}
	if plan.topK == 0 {
		sec.Note = "top_k is 0"
		return Passed{}, nil
	}
	ans, err := s.search(ctx, p, plan.ns, &searchRequest{Query: plan.req.Query, TopK: plan.topK, Agent: plan.req.Agent, UserID: plan.req.UserID})
	if providerDown(err) {
		sec.Available, sec.Note = false, "search unavailable: the embedder is down; retry for the facts"
		return Passed{}, nil
	}
	if err != nil {
		return Passed{}, err
	}
	for _, h := range ans.Hits {
		sec.Lines = append(sec.Lines, packLine{Cite: memoryCite(h.MemoryID, h.Version), Text: h.MemoryKey + ": " + valueText(h.Value),
			key: h.UserID + "\x00" + h.MemoryKey, session: h.SessionID, detail: h})
	}
	return ans.Barrier, nil
}

// recentLayer is the scope's newest revisions from the journal, newest first: what
// changed, as it changed (a later revision of the same key is a line of its own).
func (s *Service) recentLayer(ctx context.Context, p auth.Principal, plan *packPlan, sec *packSection) error {
	if plan.recent == 0 || plan.userID == noUser {
		return nil
	}
	vs, err := revisions.Recent(ctx, s.pool, revisions.Scope{Org: p.Org, Namespace: plan.ns, Agent: plan.req.Agent, UserID: plan.userID}, plan.recent)
	if err != nil {
		return httperr.Store("reading the recent revisions", err)
	}
	for _, v := range vs {
		r := v.Row
		text := r.MemoryKey + " " + changeVerb(v.Event, r) + ": " + valueText(r.Value)
		if r.Tombstone {
			text = r.MemoryKey + " deleted"
		}
		sec.Lines = append(sec.Lines, packLine{Cite: memoryCite(r.MemoryID, r.Version), Text: text,
			key: r.UserID + "\x00" + r.MemoryKey, session: r.SessionID, detail: versionOf(v)})
	}
	return nil
}

// changeVerb says what a revision did, from its event.
func changeVerb(event string, r *memrow.Row) string {
	switch {
	case r.Status == memrow.StatusSuperseded:
		return "superseded"
	case strings.Contains(event, "created"):
		return "set"
	default:
		return "changed"
	}
}

func (s *Service) sessionLayer(ctx context.Context, p auth.Principal, plan *packPlan, sec *packSection) error {
	if s.sessions == nil {
		sec.Available, sec.Note = false, "session turns not available"
		return nil
	}
	session := plan.req.SessionID
	if session == "" {
		sec.Note = "no session_id given"
		return nil
	}
	if plan.userID == noUser {
		sec.Note = "the token reads no turns of that user"
		return nil
	}
	// The pack is the user's: a session id shared by several users' conversations
	// gives the pack only this user's turns and digest, as the token bound to the
	// user would read them.
	if p.ReadUserID == "" {
		p.ReadUserID = plan.userID
	}
	// The digest and the last turns are two reads of their own: read at once.
	var digest string
	var ok bool
	var turns []Turn
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		if digest, ok, err = s.sessions.SessionDigest(gctx, p, plan.ns, session); err != nil {
			return fmt.Errorf("reading the session's digest: %w", err)
		}
		return nil
	})
	if plan.lastTurns > 0 {
		g.Go(func() error {
			var err error
			if turns, err = s.sessions.SessionTurns(gctx, p, plan.ns, session, plan.lastTurns); err != nil {
				return fmt.Errorf("reading the session's turns: %w", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if ok && digest != "" {
		sec.Lines = append(sec.Lines, packLine{Cite: "s:" + session, Text: "digest: " + digest, session: session,
			detail: map[string]string{"session_id": session, "digest": digest}})
	} else {
		sec.Note = "the session has no digest"
	}
	for _, t := range turns {
		who := t.Role
		if t.Speaker != "" {
			who += " " + t.Speaker
		}
		sec.Lines = append(sec.Lines, packLine{Cite: "t:" + t.ID, Text: who + " (" + t.OccurredAt.UTC().Format(time.RFC3339) + "): " + t.Text,
			session: t.SessionID, detail: t})
	}
	return nil
}

func (s *Service) knowledgeLayer(ctx context.Context, p auth.Principal, plan *packPlan, sec *packSection) error {
	if s.knowledge == nil {
		sec.Available, sec.Note = false, "knowledge not available"
		return nil
	}
	if plan.req.Query == "" {
		sec.Note = "no query given"
		return nil
	}
	chunks, err := s.knowledge.Knowledge(ctx, p, plan.ns, plan.req.UserID, plan.req.Query, plan.topK)
	if providerDown(err) {
		sec.Available, sec.Note = false, "knowledge search unavailable: the embedder is down; retry for the chunks"
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the knowledge chunks: %w", err)
	}
	for _, c := range chunks {
		sec.Lines = append(sec.Lines, packLine{Cite: c.Cite, Text: c.Text, detail: c})
	}
	return nil
}

// providerDown reports whether a layer's read failed only because the embedder is
// down. A pack is read before every turn of an agent: such a layer is left empty and
// marked unavailable, and the layers read from the authority (profile, recent, the
// session) still answer, rather than the whole pack failing.
func providerDown(err error) bool {
	var he *httperr.Error
	return errors.As(err, &he) && he.Code == httperr.CodeEmbedderDown
}

// memoryCite is the citation of a memory version: GET /v1/memories/{id} finds its key,
// and the key's history holds the version.
func memoryCite(memoryID string, version int64) string {
	return fmt.Sprintf("m:%s@%d", memoryID, version)
}

// valueText is a stored value as a line reads it: a string as it is, anything else
// as compact JSON.
func valueText(v []byte) string {
	var str string
	if json.Unmarshal(v, &str) == nil {
		return str
	}
	return string(v)
}
