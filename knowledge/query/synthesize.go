package query

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/llm"
)

// knowledge.synthesize: an answer across the namespace's documents with citations, in
// one model call over the passages knowledge.search finds (each page checked against
// the heads before it is shown, as the search checks it). It abstains without a call
// when the search finds nothing, and when the model says the passages do not answer
// or cites none of them. Its calls are billed as memory.ask's (purpose ask): the same
// kind of grounded answer, under the same cap.

// SynthesizeRequest is knowledge.synthesize's body: a search's, whose limit is the
// passages the prompt shows (default 8).
type SynthesizeRequest struct {
	SearchRequest
}

// Synthesis is knowledge.synthesize's answer.
type Synthesis struct {
	Answer      string `json:"answer"`
	Abstained   bool   `json:"abstained"`
	AbstainCode string `json:"abstain_code,omitempty"`
	// Citations are the passages the answer used, in the order it cited them.
	Citations []SynthesisCitation `json:"citations"`
	// CitationsDropped counts the citations that named no passage shown.
	CitationsDropped int    `json:"citations_dropped"`
	StaleDropped     int    `json:"stale_dropped"`
	PassagesRead     int    `json:"passages_read"`
	Model            string `json:"model,omitempty"`
}

// SynthesisCitation is a passage an answer used: k:<doc_id>@<version>#<ordinal>, as
// context.pack and memory.ask cite a chunk.
type SynthesisCitation struct {
	Cite      string `json:"cite"`
	SourceURI string `json:"source_uri"`
	DocID     string `json:"doc_id"`
	Version   int64  `json:"version"`
	Ordinal   int    `json:"ordinal"`
}

// Abstain codes of knowledge.synthesize.
const (
	AbstainNoPassages  = "no_passages"          // the search found nothing to read
	AbstainNotAnswered = "pool_does_not_answer" // the model says the passages do not answer
	AbstainUncited     = "no_citation"          // the answer cited no passage shown
)

const synthesizeDefaultLimit = 8

// synthesizeChars is how much of a passage the prompt shows.
const synthesizeChars = 1500

var synthesizeSchema = llm.MustSchema("grounded_synthesis", "An answer from the given document passages only, citing them.", map[string]any{
	"type": "object", "additionalProperties": false, "required": []string{"answerable", "answer", "citations"},
	"properties": map[string]any{
		"answerable": map[string]any{"type": "boolean", "description": "whether the passages answer the question"},
		"answer":     map[string]any{"type": "string", "description": "the answer, from the passages only; empty when not answerable"},
		"citations": map[string]any{"type": "array", "items": map[string]any{"type": "string"},
			"description": "the labels (k1, k2, ...) of the passages the answer uses"},
	},
})

const synthesizeRubric = `You answer a question from a team's documents, and from nothing else.
Use only the passages given (labelled k1, k2, ...). Cite every passage your answer uses by its label.
If the passages do not answer the question, set answerable to false, leave the answer empty and cite nothing. Do not guess.`

// synthesize is knowledge.synthesize.
func (s *Service) synthesize(ctx context.Context, p auth.Principal, ns string, req *SynthesizeRequest) (*Synthesis, error) {
	if req.Query == "" {
		return nil, httperr.Validation("query", "query is required")
	}
	if s.model == nil || !s.model.Configured() {
		return nil, llm.NotConfigured(llm.PurposeAsk)
	}
	if req.Limit == 0 {
		req.Limit = synthesizeDefaultLimit
	}
	found, err := s.search(ctx, p, ns, &req.SearchRequest)
	if err != nil {
		return nil, err
	}
	ans := &Synthesis{Citations: []SynthesisCitation{}, StaleDropped: found.StaleDropped, PassagesRead: len(found.Hits)}
	if len(found.Hits) == 0 {
		ans.Abstained, ans.AbstainCode = true, AbstainNoPassages
		return ans, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Question: %s\n\nDocument passages:\n", req.Query)
	for i, h := range found.Hits {
		text := h.Text
		if len(h.HeadingPath) > 0 {
			text = strings.Join(h.HeadingPath, " › ") + ": " + text
		}
		if r := []rune(text); len(r) > synthesizeChars {
			text = string(r[:synthesizeChars]) + "…"
		}
		fmt.Fprintf(&b, "[k%d] (document %q)\n%s\n\n", i+1, h.SourceURI, text)
	}
	var out struct {
		Answerable bool     `json:"answerable"`
		Answer     string   `json:"answer"`
		Citations  []string `json:"citations"`
	}
	called, err := s.model.CompleteJSON(ctx, llm.Request{Bill: llm.Bill{Org: p.Org, Namespace: ns, Purpose: llm.PurposeAsk},
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: synthesizeRubric}, {Role: llm.RoleUser, Content: b.String()}},
		Schema:   synthesizeSchema, MaxTokens: 1200}, &out)
	if err != nil {
		return nil, err
	}
	ans.Model = called.Model
	seen := map[int]bool{}
	for _, ref := range out.Citations {
		i := passageIndex(strings.TrimSpace(ref), len(found.Hits))
		if i < 0 {
			ans.CitationsDropped++
			continue
		}
		if seen[i] {
			continue
		}
		seen[i] = true
		h := found.Hits[i]
		ans.Citations = append(ans.Citations, SynthesisCitation{Cite: fmt.Sprintf("k:%s@%d#%d", h.DocID, h.Version, h.Ordinal),
			SourceURI: h.SourceURI, DocID: h.DocID, Version: h.Version, Ordinal: h.Ordinal})
	}
	switch {
	case !out.Answerable:
		ans.Abstained, ans.AbstainCode, ans.Citations = true, AbstainNotAnswered, []SynthesisCitation{}
	case len(ans.Citations) == 0:
		ans.Abstained, ans.AbstainCode = true, AbstainUncited
	default:
		ans.Answer = out.Answer
	}
	return ans, nil
}

// passageIndex is the passage a label (k2, [k2]) names among n, or -1.
func passageIndex(ref string, n int) int {
	label := strings.Trim(strings.ToLower(ref), "[]")
	if num, ok := strings.CutPrefix(label, "k"); ok {
		var i int
		if _, err := fmt.Sscanf(num, "%d", &i); err == nil && fmt.Sprint(i) == num && i >= 1 && i <= n {
			return i - 1
		}
	}
	return -1
}
