package query

import (
	"context"

	"github.com/loomplane/loom/internal/auth"
)

// stackLine is a pack's line with the record it cites: the memory as the search
// served it, the revision from the journal, the turn, the profile line or the chunk.
type stackLine struct {
	Cite   string `json:"cite"`
	Text   string `json:"text"`
	Tokens int    `json:"tokens"`
	Source any    `json:"source"`
}

type stackSection struct {
	Name      string      `json:"name"`
	Available bool        `json:"available"`
	Note      string      `json:"note,omitempty"`
	Lines     []stackLine `json:"lines"`
}

// stackAnswer is what memory.stack answers: a pack's layers as structured JSON, the
// same lines under the same budget and caps, each with its source, and no block.
type stackAnswer struct {
	Namespace string         `json:"namespace"`
	Tokens    int            `json:"tokens"`
	Budget    int            `json:"budget_tokens"`
	Tokenizer packTokenizer  `json:"tokenizer"`
	Priority  []string       `json:"priority"`
	Sections  []stackSection `json:"sections"`
	Cut       []packCut      `json:"cut"`
	Barrier   Passed         `json:"barrier"`
}

// memoryStack is memory.stack: context.pack's layers, unrendered.
func (s *Service) memoryStack(ctx context.Context, p auth.Principal, ns string, req *packRequest) (*stackAnswer, error) {
	plan, err := settlePack(p, ns, req, s.tokenizers)
	if err != nil {
		return nil, err
	}
	layers, passed, err := s.packLayers(ctx, p, plan)
	if err != nil {
		return nil, err
	}
	kept, cuts, _, tokens := fitPack(layers, plan.lim, plan.format, plan.tok.Count)
	if cuts == nil {
		cuts = []packCut{}
	}
	ans := &stackAnswer{Namespace: ns, Tokens: tokens, Budget: plan.lim.Budget, Tokenizer: plan.tok, Priority: plan.sections, Cut: cuts, Barrier: stateOf(passed)}
	for _, sec := range kept {
		out := stackSection{Name: sec.Name, Available: sec.Available, Note: sec.Note, Lines: []stackLine{}}
		for _, l := range sec.Lines {
			out.Lines = append(out.Lines, stackLine{Cite: l.Cite, Text: l.Text, Tokens: l.Tokens, Source: l.detail})
		}
		ans.Sections = append(ans.Sections, out)
	}
	return ans, nil
}
