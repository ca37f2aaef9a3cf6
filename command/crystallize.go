package command

import (
	"context"
	"unicode/utf8"

	"github.com/loomplane/loom/command/extraction"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/route"
)

// observe.crystallize (POST /v1/namespaces/{ns}/turns:crystallize) turns a session's
// observed turns into facts on demand: the turns memory.observe kept that no
// crystallization has read yet, oldest first, go through memory.set_from_messages'
// pipeline as its transcript, and the facts drawn from them are linked to those very
// turns (no turn is kept twice). The facts' commit marks the turns read, so a second
// call reads only turns observed since; a call that writes nothing marks them after.
// It runs inline: an agent calls it when a session ends, or when it wants the facts now.

// maxCrystallizedTurns bounds the turns one call reads (a transcript's limit).
const maxCrystallizedTurns = 1000

// crystallizeRequest is observe.crystallize's body: the session, and the extraction's
// options as memory.set_from_messages takes them.
type crystallizeRequest struct {
	Agent        string   `json:"agent,omitempty"`
	UserID       string   `json:"user_id,omitempty"`
	SessionID    string   `json:"session_id,omitempty"`
	MemoryType   string   `json:"memory_type,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	SessionKind  string   `json:"session_kind,omitempty"`
	RecalledKeys []string `json:"recalled_keys,omitempty"`
	Steps        []string `json:"steps,omitempty"`
	Skip         []string `json:"skip,omitempty"`
	DryRun       bool     `json:"dry_run,omitempty"`
}

// crystallizeAnswer is memory.set_from_messages' answer over the turns read
// (turn_ids), and how many observed turns of the session are still to be read (a
// call reads at most 1000, and no more than LOOM_EXTRACTION_MAX_CHARS of text).
type crystallizeAnswer struct {
	*extraction.Answer
	Crystallized int  `json:"crystallized"`
	More         bool `json:"more"`
}

func (a *crystallizeAnswer) committed() bool { return a.Answer.Committed() }
func (a *crystallizeAnswer) outcome() string {
	if a.Crystallized == 0 {
		return "nothing_to_read"
	}
	return a.Answer.Outcome()
}

// crystallize is observe.crystallize.
func (s *Service) crystallize(ctx context.Context, p auth.Principal, ns string, req crystallizeRequest, o origin) (*crystallizeAnswer, error) {
	id, other, err := route.WriteIdentity(p, ns, "", route.Names{Agent: req.Agent, UserID: req.UserID, SessionID: req.SessionID})
	if err != nil {
		return nil, err
	}
	if other {
		return nil, otherUser()
	}
	if err := validIdentity(id); err != nil {
		return nil, err
	}
	pl := s.extraction()
	body := &extraction.Request{Agent: req.Agent, UserID: req.UserID, SessionID: req.SessionID, MemoryType: req.MemoryType,
		Tags: req.Tags, SessionKind: req.SessionKind, RecalledKeys: req.RecalledKeys, Steps: req.Steps, Skip: req.Skip, DryRun: req.DryRun,
		Messages: []extraction.Message{{Role: "user", Content: "x"}}}
	// The options are checked before anything is read: a bad one is a 422 whatever the
	// session holds.
	if _, err := pl.Check(body, id); err != nil {
		return nil, err
	}
	if err := s.checkModels(ctx, llm.Bill{Org: p.Org, Namespace: ns, Purpose: llm.PurposeExtraction}); err != nil {
		return nil, err
	}
	held, texts, err := evidence.Uncrystallized(ctx, s.pool, evidence.Scope{Org: id.Org, Namespace: id.Namespace, UserID: id.UserID},
		id.SessionID, maxCrystallizedTurns+1)
	if err != nil {
		return nil, httperr.Store("reading the session's observed turns", err)
	}
	more := len(held) > maxCrystallizedTurns
	chars, n := 0, 0
	for n < len(held) && n < maxCrystallizedTurns {
		c := utf8.RuneCountInString(texts[n].Text)
		if n > 0 && chars+c > s.cfg.Extraction.MaxChars {
			more = true
			break
		}
		chars += c
		n++
	}
	held, texts = held[:n], texts[:n]
	empty := &extraction.Answer{Namespace: ns, Agent: id.Agent, UserID: id.UserID, SessionID: id.SessionID, Facts: []extraction.Fact{},
		Forgotten: []extraction.Forgotten{}, Superseded: []string{}, Steps: []extraction.StepReport{}, DryRun: req.DryRun}
	if n == 0 {
		return &crystallizeAnswer{Answer: empty}, nil
	}
	body.Messages = make([]extraction.Message, n)
	for i, t := range texts {
		at := t.OccurredAt
		body.Messages[i] = extraction.Message{Role: t.Role, Content: t.Text, Speaker: t.Speaker, At: &at}
	}
	steps, err := pl.Check(body, id)
	if err != nil {
		return nil, err
	}
	var in *Inputs
	if !req.DryRun {
		in = &Inputs{held: held}
	}
	ans, err := pl.Run(ctx, extraction.Run{Principal: p, Namespace: ns, Identity: id, Request: body,
		Writer: &factWriter{s: s, origin: o, inputs: in}}, steps)
	if err != nil {
		return nil, err
	}
	if !ans.DryRun {
		ans.TurnIDs = s.KeepInputs(ctx, in, ans.Facts)
	}
	return &crystallizeAnswer{Answer: ans, Crystallized: n, More: more}, nil
}
