package query

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// The page assembler's caps (seeds, memory.search step 8: the window cut to a budget):
// how many hits one memory key and one session hold (per_key, per_session), and how
// many tokens the page's text holds (max_tokens), counted with the tokenizer
// context.pack counts with (pack_tokenizer.go). The page is walked in its order, the
// memory hits first, then the evidence hits: a hit a cap refuses, or that does not fit
// what is left of the tokens, is cut, and the hits after it are still tried. Each cut
// is reported with its citation, reason and cost. The verdict, gates and grounding
// judged the page before the caps; a cut hit is not moved to the next page.

// pageCaps are a search's caps, settled (0: no cap).
type pageCaps struct {
	maxTokens, perKey, perSession int
	tok                           packTokenizer
}

// pageCut is a hit the caps cut, and why (per_key, per_session or budget).
type pageCut struct {
	Kind      string `json:"kind"` // memory, chunk, digest or entity_summary
	Cite      string `json:"cite"` // m:<memory id>@<version>, c:<chunk id> or s:<session id>
	MemoryKey string `json:"memory_key,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	Reason    string `json:"reason"`
	Tokens    int    `json:"tokens"`
}

// pageBudget is what the caps kept and cut.
type pageBudget struct {
	MaxTokens  int           `json:"max_tokens,omitempty"`
	PerKey     int           `json:"per_key,omitempty"`
	PerSession int           `json:"per_session,omitempty"`
	Tokens     int           `json:"tokens"` // the kept hits' tokens
	Tokenizer  packTokenizer `json:"tokenizer"`
	Cut        []pageCut     `json:"cut"`
}

// settleCaps checks a request's caps: nil when it sets none.
func (s *Service) settleCaps(req *searchRequest) (*pageCaps, error) {
	if req.MaxTokens == nil && req.PerKey == nil && req.PerSession == nil && req.Tokenizer == "" && req.Model == "" {
		return nil, nil
	}
	c := &pageCaps{}
	if req.MaxTokens != nil {
		n := *req.MaxTokens
		if n < minPackBudget || n > maxPackBudget {
			return nil, httperr.Validation("max_tokens", fmt.Sprintf("max_tokens must be an integer from %d to %d", minPackBudget, maxPackBudget))
		}
		c.maxTokens = int(n)
	}
	for _, f := range []struct {
		name string
		v    *int
		into *int
	}{{"per_key", req.PerKey, &c.perKey}, {"per_session", req.PerSession, &c.perSession}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 || *f.v > packCapMax {
			return nil, httperr.Validation(f.name, fmt.Sprintf("%s must be an integer from 1 to %d", f.name, packCapMax))
		}
		*f.into = *f.v
	}
	tok, err := s.tokenizers.For(req.Tokenizer, req.Model)
	if err != nil {
		return nil, err
	}
	c.tok = tok
	return c, nil
}

// memoryHitText is the text a memory hit puts on a page: its value, a string as it
// reads, anything else as its JSON.
func memoryHitText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

// evidenceHitText is the text an evidence hit puts on a page: its own, and the turns
// of its window that are not its own.
func evidenceHitText(h evidenceHit) string {
	out := h.Text
	own := map[string]bool{}
	for _, id := range h.TurnIDs {
		own[id] = true
	}
	for _, t := range h.Window {
		if !own[t.ID] {
			who := t.Speaker
			if who == "" {
				who = t.Role
			}
			out += "\n" + who + ": " + t.Text
		}
	}
	return out
}

// capItem is one hit as the caps see it.
type capItem struct {
	kind, cite, key, memoryKey, session, sessionID, text string
}

// capPage cuts the answer's page to its caps and reports what it cut; no caps, no
// change.
func capPage(c *pageCaps, ans *searchAnswer) {
	if c == nil {
		return
	}
	var items []capItem
	for _, h := range ans.Hits {
		session := ""
		if h.SessionID != "" && h.SessionID != memrow.DefaultIdentity {
			session = h.Namespace + "\x00" + h.UserID + "\x00" + h.SessionID
		}
		items = append(items, capItem{kind: "memory", cite: "m:" + h.MemoryID + "@" + strconv.FormatInt(h.Version, 10),
			key: h.Namespace + "\x00" + h.UserID + "\x00" + h.MemoryKey, memoryKey: h.MemoryKey, session: session,
			sessionID: h.SessionID, text: memoryHitText(h.Value)})
	}
	var evHits []evidenceHit
	if ans.Evidence != nil {
		evHits = ans.Evidence.Hits
	}
	for _, h := range evHits {
		session := "" // an entity summary is of no session
		if h.SessionID != "" {
			session = h.Namespace + "\x00" + h.UserID + "\x00" + h.SessionID
		}
		items = append(items, capItem{kind: h.Kind, cite: h.Cite, session: session, sessionID: h.SessionID, text: evidenceHitText(h)})
	}
	kept, cuts, tokens := fitPage(items, c, c.tok.Count)
	b := &pageBudget{MaxTokens: c.maxTokens, PerKey: c.perKey, PerSession: c.perSession, Tokens: tokens, Tokenizer: c.tok, Cut: cuts}
	hits := ans.Hits[:0]
	for i, h := range ans.Hits {
		if kept[i] {
			hits = append(hits, h)
		}
	}
	ans.Hits = hits
	if ans.Evidence != nil {
		ev := ans.Evidence.Hits[:0]
		for i, h := range ans.Evidence.Hits {
			if kept[len(kept)-len(evHits)+i] {
				ev = append(ev, h)
			}
		}
		ans.Evidence.Hits = ev
	}
	ans.Budget = b
}

// fitPage decides which items the caps keep, in order: kept[i] for each item, the
// cuts in order, and the kept items' tokens.
func fitPage(items []capItem, c *pageCaps, count func(string) int) ([]bool, []pageCut, int) {
	kept := make([]bool, len(items))
	cuts := []pageCut{}
	perKey, perSession := map[string]int{}, map[string]int{}
	used := 0
	for i, it := range items {
		cost := count(it.text)
		reason := ""
		switch {
		case c.perKey > 0 && it.key != "" && perKey[it.key] >= c.perKey:
			reason = cutPerKey
		case c.perSession > 0 && it.session != "" && perSession[it.session] >= c.perSession:
			reason = cutPerSession
		case c.maxTokens > 0 && used+cost > c.maxTokens:
			reason = cutBudget
		}
		if reason != "" {
			cuts = append(cuts, pageCut{Kind: it.kind, Cite: it.cite, MemoryKey: it.memoryKey, SessionID: it.sessionID,
				Reason: reason, Tokens: cost})
			continue
		}
		kept[i] = true
		if it.key != "" {
			perKey[it.key]++
		}
		if it.session != "" {
			perSession[it.session]++
		}
		used += cost
	}
	return kept, cuts, used
}
