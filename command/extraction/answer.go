package extraction

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/memrow"
)

// Writer is the write side's part in a run: the stored rows nearest a transcript, and
// the write of the facts through memory.bulk_set's path, every fact judged as any
// write is, in one commit with the retirements.
type Writer interface {
	// Nearest reads the subject's stored rows nearest text (the peers a write of it
	// would have).
	Nearest(ctx context.Context, id memrow.Identity, memoryType, readUserID, text string) ([]*memrow.Row, error)
	// Write writes a batch and reports what became of it.
	Write(ctx context.Context, w Write) (*Written, error)
}

// Write is a batch of facts as memory.bulk_set entries, and the heads the same commit
// retires (the transcript's "forget this").
type Write struct {
	Principal auth.Principal
	Namespace string
	Entries   []json.RawMessage
	DryRun    bool
	Retire    []memrow.Identity
	// MessageIndex is the message each entry was drawn from, by entry.
	MessageIndex []int
	// Learnings are rules about the agent itself, filed to the learnings queue in the
	// same commit (or alone when no fact commits).
	Learnings []Learning
	// Identity is the facts' identity, without a key: the learnings' supporter.
	Identity memrow.Identity
}

// Learning is a rule about the agent itself, the message that states it and that
// message's text (the supporter's quote).
type Learning struct {
	Rule, Quote  string
	MessageIndex int
}

// Written is what a batch made of its entries, as its last round left them.
type Written struct {
	// Outcomes are the entries' outcomes by index (the fields of a Fact the write
	// decides: Verdict, MemoryID, VersionText, Status, Revised, MergedInto,
	// DuplicateOf, ConflictWith).
	Outcomes   map[int]Fact
	Retired    []Retired
	Superseded []string
	DryRun     bool
	// Committed: the batch committed a fact, a retirement or a learning.
	Committed bool
	// LearningIDs are the learnings' candidate ids, by Write.Learnings' index (none on a
	// dry run).
	LearningIDs []string
}

// Retired is what a batch did with one head it was asked to retire.
type Retired struct {
	Identity memrow.Identity
	MemoryID string
	Retired  bool
	Skipped  string // why not: "missing" (no live head), "locked", "written" (the batch writes the key)
}

// answer lists every fact in transcript order with what became of it.
func (st *state) answer(writes bool) *Answer {
	a := &Answer{Namespace: st.ns, Agent: st.identity.Agent, UserID: st.identity.UserID, SessionID: st.identity.SessionID,
		Facts: []Fact{}, Forgotten: []Forgotten{}, Superseded: []string{}, Steps: st.steps, ModelCalls: st.modelCalls,
		ModelMs: float64(st.modelTime.Microseconds()) / 1000, DryRun: st.req.DryRun,
		Usage: Usage{PromptTokens: st.usage.PromptTokens, CompletionTokens: st.usage.CompletionTokens, CostUSD: st.usage.CostUSD}}
	type placed struct {
		f   Fact
		msg int
	}
	var all []placed
	for _, c := range st.dropped {
		key := c.key
		if key == "" {
			key = c.rawKey
		}
		f := Fact{Key: key, Value: c.value, MessageIndex: c.msg, Verdict: factDropped, DroppedBy: c.droppedBy, Reason: c.reason}
		if c.duplicateOf != "" {
			// A value already stored merges into the memory that holds it.
			f.Verdict, f.MergedInto = VerdictMerge, c.duplicateOf
		}
		all = append(all, placed{f, c.msg})
	}
	outcomes := map[int]Fact{}
	if b := st.written; b != nil {
		outcomes = b.Outcomes
		a.Superseded = b.Superseded
		a.Wrote = b.Committed
	}
	for i, c := range st.facts {
		f, ok := outcomes[i]
		if !ok {
			f = Fact{Verdict: factNotWritten}
		}
		f.Key, f.Value, f.MessageIndex = c.key, c.value, c.msg
		all = append(all, placed{f, c.msg})
	}
	for i, c := range st.learnings {
		f := Fact{Key: c.key, Value: c.value, MessageIndex: c.msg, About: aboutAgent, Verdict: VerdictLearning}
		if b := st.written; b != nil && i < len(b.LearningIDs) {
			f.LearningID = b.LearningIDs[i]
		}
		all = append(all, placed{f, c.msg})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].msg < all[j].msg })
	for _, p := range all {
		a.Facts = append(a.Facts, p.f)
	}
	a.Forgotten = st.forgottenRows(writes)
	return a
}

// forgottenRows reports each key the transcript asked to forget.
func (st *state) forgottenRows(writes bool) []Forgotten {
	out := []Forgotten{}
	done := map[string]bool{}
	msgOf := map[string]int{}
	for _, f := range st.forgets {
		msgOf[f.key] = f.msg
	}
	if b := st.written; b != nil {
		for _, r := range b.Retired {
			out = append(out, Forgotten{Key: r.Identity.MemoryKey, MessageIndex: msgOf[r.Identity.MemoryKey], MemoryID: r.MemoryID,
				Agent: r.Identity.Agent, UserID: r.Identity.UserID, SessionID: r.Identity.SessionID, Retired: r.Retired && !b.DryRun, Skipped: r.Skipped})
			done[r.Identity.MemoryKey] = true
		}
	}
	for _, f := range st.forgets {
		if done[f.key] {
			continue
		}
		skipped := "missing"
		if !writes {
			skipped = factNotWritten
		}
		out = append(out, Forgotten{Key: f.key, MessageIndex: f.msg, Skipped: skipped})
	}
	return out
}

// live reports whether a head is live now.
func live(h *memrow.Row) bool { return h.Live(time.Now()) }
