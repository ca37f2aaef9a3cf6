package query

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
)

// memory.ask (POST /v1/namespaces/{ns}/memories:ask): a grounded answer instead of a
// list. It runs memory.search behind the barrier (this file depends only on search's
// answer), checks the pool it returns against the Postgres heads once more, and makes
// one call that answers only from the pool and cites the memories it used. It
// abstains, with the search's code, when the search abstains (no call is made), and
// with its own when the model says the pool does not answer or cites nothing from it.
// Citations are checked to be pool members: an invented id is dropped and counted.

// askRequest is the body of memory.ask: a search's, and stream.
type askRequest struct {
	Query      string   `json:"query"`
	TopK       int      `json:"top_k"`
	Namespaces []string `json:"namespaces"`
	Agent      string   `json:"agent"`
	UserID     string   `json:"user_id"`
	SessionID  string   `json:"session_id"`
	MemoryType string   `json:"memory_type"`
	Tags       []string `json:"tags"`
	TagsMode   string   `json:"tags_mode"`
	Graph      bool     `json:"graph"`
	// Stream answers with server-sent events (as Accept: text/event-stream does): the
	// search's answer as soon as it is known, then the answer.
	Stream bool `json:"stream"`
	// Knowledge reads the namespace's documents too (knowledge.search), beside the
	// memories; false leaves them out. Absent: true.
	Knowledge *bool `json:"knowledge"`
}

// Abstain codes of memory.ask besides the search's own verdicts.
const (
	AbstainNotAnswered = "pool_does_not_answer" // the model says the pool does not answer the question
	AbstainUncited     = "no_citation"          // the answer cited no memory of the pool
)

// askDefaultTopK is the pool an ask reads when the request names none.
const askDefaultTopK = 8

// askKnowledgeK is how many document chunks an ask reads beside its memories.
const askKnowledgeK = 5

// askValueChars is how much of a memory's value the prompt shows.
const askValueChars = 1500

// askCitation is a memory an answer used.
type askCitation struct {
	MemoryID  string `json:"memory_id"`
	Namespace string `json:"namespace"`
	MemoryKey string `json:"memory_key"`
}

// askKnowledgeCitation is a document chunk an answer used: its citation
// (k:<doc_id>@<version>#<ordinal>, as context.pack's knowledge layer cites) and its
// source.
type askKnowledgeCitation struct {
	Cite      string `json:"cite"`
	SourceURI string `json:"source_uri"`
	DocID     string `json:"doc_id"`
	Version   int64  `json:"version"`
	Ordinal   int    `json:"ordinal"`
}

// askAnswer is what memory.ask answers.
type askAnswer struct {
	Answer      string `json:"answer"`
	Abstained   bool   `json:"abstained"`
	AbstainCode string `json:"abstain_code,omitempty"`
	// Citations are the pool's memories the answer used, in the order it cited them.
	Citations []askCitation `json:"citations"`
	// KnowledgeCitations are the document chunks the answer used (knowledge.search's,
	// read beside the memories), in the order it cited them.
	KnowledgeCitations []askKnowledgeCitation `json:"knowledge_citations"`
	// KnowledgeRead counts the document chunks the prompt showed.
	KnowledgeRead int `json:"knowledge_read"`
	// CitationsDropped counts the citations that named nothing of the pool.
	CitationsDropped int `json:"citations_dropped"`
	// StaleDropped counts the pool's memories whose head moved between the search and
	// the prompt: the model never saw them.
	StaleDropped int `json:"stale_dropped"`
	// PendingExtraction is the search's: a deferred extraction of the scope is not
	// done yet, so the pool may lack facts still to come.
	PendingExtraction bool   `json:"pending_extraction"`
	Model             string `json:"model,omitempty"`
	// Search is the search the answer reads: its verdict, barrier and hits (the pool).
	Search *searchAnswer `json:"search"`
}

// askState is an ask between its search and its call.
type askState struct {
	p      auth.Principal
	ns     string
	req    *askRequest
	search *searchAnswer
	// knowledge is what knowledge.search found for the question (checked against the
	// documents' heads in its own Postgres read).
	knowledge []KnowledgeChunk
}

var askSchema = llm.MustSchema("grounded_answer", "An answer from the given memories only, citing them.", map[string]any{
	"type": "object", "additionalProperties": false, "required": []string{"answerable", "answer", "citations"},
	"properties": map[string]any{
		"answerable": map[string]any{"type": "boolean", "description": "whether the memories answer the question"},
		"answer":     map[string]any{"type": "string", "description": "the answer, from the memories only; empty when not answerable"},
		"citations": map[string]any{"type": "array", "items": map[string]any{"type": "string"},
			"description": "the labels (m1, m2, ... and k1, k2, ...) of the memories and passages the answer uses"},
	},
})

const askRubric = `You answer a question from an agent's stored memories and the team's documents, and from nothing else.
Use only the memories (labelled m1, m2, ...) and document passages (labelled k1, k2, ...) given. Cite every one your answer uses by its label.
If they do not answer the question, set answerable to false, leave the answer empty and cite nothing. Do not guess.`

// ask is memory.ask.
func (s *Service) ask(ctx context.Context, p auth.Principal, ns string, req *askRequest) (*askAnswer, error) {
	st, err := s.askSearch(ctx, p, ns, req)
	if err != nil {
		return nil, err
	}
	return s.askModel(ctx, st)
}

// askSearch checks the provider and the namespace's budget (a capped namespace is
// refused before anything runs), then runs the search.
func (s *Service) askSearch(ctx context.Context, p auth.Principal, ns string, req *askRequest) (*askState, error) {
	if req.Query == "" {
		return nil, httperr.Validation("query", "query is required")
	}
	if err := p.Namespace(ns); err != nil {
		return nil, err
	}
	if s.model == nil || !s.model.Configured() {
		return nil, llm.NotConfigured(llm.PurposeAsk)
	}
	bill := llm.Bill{Org: p.Org, Namespace: ns, Purpose: llm.PurposeAsk}
	b, err := s.model.Allowance(ctx, bill)
	if err != nil {
		return nil, httperr.Store("reading the namespace's spend", err)
	}
	if b.Capped() {
		// Refused before the search runs, as the call would be.
		return nil, &llm.Error{Class: llm.ClassCapped, Purpose: llm.PurposeAsk, CapUSD: b.CapUSD, SpentUSD: b.SpentUSD,
			ResetsAt: b.ResetsAt, RetryAfter: time.Until(b.ResetsAt),
			Message: fmt.Sprintf("namespace %s has spent $%.4f of its daily cost cap ($%.4f) today; it resets at %s",
				ns, b.SpentUSD, b.CapUSD, b.ResetsAt.Format(time.RFC3339))}
	}
	topK := req.TopK
	if topK == 0 {
		topK = askDefaultTopK
	}
	sreq := &searchRequest{Query: req.Query, TopK: topK, Namespaces: req.Namespaces, Agent: req.Agent, UserID: req.UserID,
		SessionID: req.SessionID, MemoryType: req.MemoryType, Tags: req.Tags, TagsMode: req.TagsMode, Graph: req.Graph}
	ans, err := s.search(ctx, p, ns, sreq)
	if err != nil {
		return nil, err
	}
	st := &askState{p: p, ns: ns, req: req, search: ans}
	if s.knowledge != nil && (req.Knowledge == nil || *req.Knowledge) {
		// Read through knowledge.search, which fails closed (503 POSTGRES_UNAVAILABLE)
		// rather than serve a chunk it could not check against its head.
		if st.knowledge, err = s.knowledge.Knowledge(ctx, p, ns, req.UserID, req.Query, askKnowledgeK); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// askModel validates the pool and makes the call.
func (s *Service) askModel(ctx context.Context, st *askState) (*askAnswer, error) {
	ans := &askAnswer{Citations: []askCitation{}, KnowledgeCitations: []askKnowledgeCitation{}, Search: st.search,
		PendingExtraction: st.search.PendingExtraction}
	// The memories' verdict abstains only when no document answers either.
	if st.search.Verdict != VerdictOK && len(st.knowledge) == 0 {
		ans.Abstained, ans.AbstainCode = true, string(st.search.Verdict)
		s.asks.With("abstained").Inc()
		return ans, nil
	}
	var pool []hitView
	if st.search.Verdict == VerdictOK {
		var stale int
		var err error
		if pool, stale, err = s.recheckPool(ctx, st.p, st.search.Hits); err != nil {
			return nil, httperr.Store("checking the pool against its heads", err)
		}
		ans.StaleDropped = stale
	}
	ans.KnowledgeRead = len(st.knowledge)
	if len(pool) == 0 && len(st.knowledge) == 0 {
		ans.Abstained, ans.AbstainCode = true, string(VerdictNoMatch)
		s.asks.With("abstained").Inc()
		return ans, nil
	}
	var out struct {
		Answerable bool     `json:"answerable"`
		Answer     string   `json:"answer"`
		Citations  []string `json:"citations"`
	}
	called, err := s.model.CompleteJSON(ctx, llm.Request{Bill: llm.Bill{Org: st.p.Org, Namespace: st.ns, Purpose: llm.PurposeAsk},
		Messages: askPrompt(st.req.Query, pool, st.knowledge), Schema: askSchema, MaxTokens: 1200}, &out)
	if err != nil {
		s.asks.With("error").Inc()
		return nil, err
	}
	ans.Model = called.Model
	cited, kcited, dropped := citationsOf(out.Citations, pool, st.knowledge)
	ans.CitationsDropped = dropped
	s.citationsDropped.Add(float64(dropped))
	switch {
	case !out.Answerable:
		ans.Abstained, ans.AbstainCode = true, AbstainNotAnswered
	case len(cited) == 0 && len(kcited) == 0:
		ans.Abstained, ans.AbstainCode = true, AbstainUncited
	default:
		ans.Answer, ans.Citations, ans.KnowledgeCitations = out.Answer, cited, kcited
	}
	outcome := "answered"
	if ans.Abstained {
		outcome = "abstained"
	}
	s.asks.With(outcome).Inc()
	return ans, nil
}

// recheckPool keeps the hits whose Postgres head still serves what the search served:
// the same value, live, searchable, in the token's read scope. The hits served are the
// heads as read now.
func (s *Service) recheckPool(ctx context.Context, p auth.Principal, hits []hitView) ([]hitView, int, error) {
	byNS := map[string][]memrow.Identity{}
	for _, h := range hits {
		byNS[h.Namespace] = append(byNS[h.Namespace], memrow.Identity{Org: p.Org, Namespace: h.Namespace, Agent: h.Agent,
			UserID: h.UserID, SessionID: h.SessionID, MemoryKey: h.MemoryKey})
	}
	current := map[string]map[string]*memrow.Row{}
	for ns, ids := range byNS {
		hs, err := heads.Many(ctx, s.pool, p.Org, ns, ids)
		if err != nil {
			return nil, 0, err
		}
		current[ns] = hs
	}
	now := s.now()
	var kept []hitView
	stale := 0
	for _, h := range hits {
		id := memrow.Identity{Agent: h.Agent, UserID: h.UserID, SessionID: h.SessionID, MemoryKey: h.MemoryKey}
		r := current[h.Namespace][heads.IdentityKey(id)]
		if r == nil || r.ContentSHA256 != h.ContentSHA256 || r.MemoryID != h.MemoryID || !r.Served(now) || !inReadScope(p, r) {
			stale++
			continue
		}
		h.memoryView = viewOf(r)
		kept = append(kept, h)
	}
	return kept, stale, nil
}

// askPrompt names each pool member m1..mN with its key and when it was written, and
// each document passage k1..kK with its source.
func askPrompt(query string, pool []hitView, knowledge []KnowledgeChunk) []llm.Message {
	var b strings.Builder
	fmt.Fprintf(&b, "Question: %s\n\nMemories:\n", query)
	for i, h := range pool {
		fmt.Fprintf(&b, "[m%d] (key %q, written %s)\n%s\n\n", i+1, h.MemoryKey, h.UpdatedAt.UTC().Format(time.RFC3339),
			cutRunes(memrow.ValueText(h.Value), askValueChars))
	}
	if len(knowledge) > 0 {
		b.WriteString("Document passages:\n")
		for i, k := range knowledge {
			fmt.Fprintf(&b, "[k%d] (document %q)\n%s\n\n", i+1, k.SourceURI, cutRunes(k.Text, askValueChars))
		}
	}
	return []llm.Message{{Role: llm.RoleSystem, Content: askRubric}, {Role: llm.RoleUser, Content: b.String()}}
}

// citationsOf maps an answer's citations (m2, [m2], or a memory id; k1, [k1]) to the
// pool's memories and document passages, once each, and counts those that name none.
func citationsOf(refs []string, pool []hitView, knowledge []KnowledgeChunk) ([]askCitation, []askKnowledgeCitation, int) {
	out := []askCitation{}
	kout := []askKnowledgeCitation{}
	seen := map[string]bool{}
	dropped := 0
	for _, ref := range refs {
		if j := knowledgeIndex(strings.TrimSpace(ref), knowledge); j >= 0 {
			k := knowledge[j]
			if !seen[k.Cite] {
				seen[k.Cite] = true
				kout = append(kout, askKnowledgeCitation{Cite: k.Cite, SourceURI: k.SourceURI, DocID: k.DocID, Version: k.Version, Ordinal: k.Ordinal})
			}
			continue
		}
		i := poolIndex(strings.TrimSpace(ref), pool)
		if i < 0 {
			dropped++
			continue
		}
		h := pool[i]
		if seen[h.MemoryID] {
			continue
		}
		seen[h.MemoryID] = true
		out = append(out, askCitation{MemoryID: h.MemoryID, Namespace: h.Namespace, MemoryKey: h.MemoryKey})
	}
	return out, kout, dropped
}

// knowledgeIndex is the passage a label (k2, [k2]) or a citation names, or -1.
func knowledgeIndex(ref string, knowledge []KnowledgeChunk) int {
	label := strings.Trim(strings.ToLower(ref), "[]")
	if n, ok := strings.CutPrefix(label, "k"); ok {
		var i int
		if _, err := fmt.Sscanf(n, "%d", &i); err == nil && fmt.Sprint(i) == n && i >= 1 && i <= len(knowledge) {
			return i - 1
		}
	}
	for i, k := range knowledge {
		if k.Cite == ref {
			return i
		}
	}
	return -1
}

func poolIndex(ref string, pool []hitView) int {
	label := strings.Trim(strings.ToLower(ref), "[]")
	if n, ok := strings.CutPrefix(label, "m"); ok {
		var i int
		if _, err := fmt.Sscanf(n, "%d", &i); err == nil && fmt.Sprint(i) == n && i >= 1 && i <= len(pool) {
			return i - 1
		}
	}
	for i, h := range pool {
		if h.MemoryID == ref {
			return i
		}
	}
	return -1
}

func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
