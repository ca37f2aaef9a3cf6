package command

import (
	"time"

	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/text"
)

// Verdict is what a write's admission made of it against its peers, and what the
// answer says of each peer it judged. No verdict calls a model.
type Verdict string

// Verdicts a write can reach against its peers.
const (
	VerdictNew         Verdict = "new"         // no close peer: the row is a fact of its own
	VerdictRestatement Verdict = "restatement" // the key's own live value again: reinforced
	VerdictMerge       Verdict = "merge"       // a peer holds the same canonical value: nothing is written
	VerdictDuplicate   Verdict = "duplicate"   // a near-identical peer: written, not served, linked to it
	VerdictRefines     Verdict = "refines"     // newest_wins: another object for the peer's subject and predicate; the peer retires
	VerdictConflict    Verdict = "conflict"    // a close peer that says something else: both rows flagged
	VerdictPinned      Verdict = "pinned"      // a close pinned peer: the write is refused (409)
	// A judged peer that decided nothing: out of reach, or within it while another
	// peer decided.
	VerdictBelow Verdict = "below_threshold"
	VerdictClose Verdict = "close"
	// A close peer of another subject (sameSubject), which only its pin makes count.
	VerdictOtherSubject Verdict = "other_subject"
)

// peer is a row another key holds, with its cosine to the write's value.
type peer struct {
	row    *memrow.Row
	cosine float64
	vector []float32 // set for a gap row a batch measures against each entry
}

// judgedPeer is how the answer names each peer the verdict looked at.
type judgedPeer struct {
	MemoryID  string  `json:"memory_id"`
	MemoryKey string  `json:"memory_key"`
	Agent     string  `json:"agent"`
	UserID    string  `json:"user_id"`
	SessionID string  `json:"session_id"`
	Cosine    float64 `json:"cosine"`
	Verdict   Verdict `json:"verdict"`
}

// verdict is the outcome of judging a write against its peers.
type verdict struct {
	kind      Verdict
	target    *memrow.Row   // merge, duplicate and refines: the peer acted on
	conflicts []*memrow.Row // conflict: every close peer that says something else
	judged    []judgedPeer
}

// verdictInput is everything decide needs; it reads no store.
type verdictInput struct {
	row                *memrow.Row // the row the write would commit
	valueText          string
	policy             string
	threshold          float64 // conflict threshold: a peer below it is not close
	duplicateThreshold float64
	peers              []peer // nearest first
}

// decide applies the rules in the order schemas/openapi.yaml gives memory.set's
// verdict: canonical-form match → merge; a close pinned peer → refused; under
// newest_wins a templated substitution → refines (or conflict when the peer's fact
// starts later); a near-identical statement → duplicate; any other close peer →
// conflict. A key-identified type (a decision) only ever conflicts, and no pin refuses
// it. append_only judges nothing.
func decide(in verdictInput) verdict {
	v := verdict{kind: VerdictNew}
	if in.policy == PolicyAppendOnly {
		return v
	}
	keyIdentified := memrow.KeyIdentifiedTypes[in.row.MemoryType]
	var close []peer
	for _, p := range in.peers {
		j := judgedPeer{MemoryID: p.row.MemoryID, MemoryKey: p.row.MemoryKey, Agent: p.row.Agent, UserID: p.row.UserID,
			SessionID: p.row.SessionID, Cosine: round4(p.cosine), Verdict: VerdictBelow}
		sameValue := p.row.ContentSHA256 == in.row.ContentSHA256
		switch {
		case p.cosine < in.threshold && (keyIdentified || !sameValue):
		case !sameSubject(p.row, in.row) && (!p.row.Pinned || sameValue):
			// Another user's fact is not this one: it neither absorbs the write nor is
			// flagged or retired by it; only a pin on a different value protects it.
			j.Verdict = VerdictOtherSubject
		default:
			close = append(close, p)
			j.Verdict = ""
		}
		v.judged = append(v.judged, j)
	}
	mark := func(p peer, kind Verdict) {
		for i := range v.judged {
			if v.judged[i].MemoryID == p.row.MemoryID && v.judged[i].MemoryKey == p.row.MemoryKey && v.judged[i].Verdict == "" {
				v.judged[i].Verdict = kind
			}
		}
	}
	// acted names the verdict's own peer; the other close peers are labelled
	// "close": they were within reach but another rule decided.
	acted := func(p peer, kind Verdict) verdict {
		mark(p, kind)
		for i := range v.judged {
			if v.judged[i].Verdict == "" {
				v.judged[i].Verdict = VerdictClose
			}
		}
		return verdict{kind: kind, target: p.row, judged: v.judged}
	}
	conflict := func() verdict {
		v.kind = VerdictConflict
		for _, p := range close {
			v.conflicts = append(v.conflicts, p.row)
			mark(p, VerdictConflict)
		}
		return v
	}
	if len(close) == 0 {
		return v
	}
	if keyIdentified {
		return conflict()
	}
	for _, p := range close {
		if p.row.ContentSHA256 == in.row.ContentSHA256 {
			return acted(p, VerdictMerge)
		}
	}
	for _, p := range close {
		if p.row.Pinned {
			return acted(p, VerdictPinned)
		}
	}
	peerText := func(p peer) string { return memrow.ValueText(p.row.Value) }
	if in.policy == PolicyNewestWins {
		for _, p := range close {
			if templatedSubstitution(in.valueText, peerText(p)) {
				if startsAfter(p.row, in.row) {
					break
				}
				return acted(p, VerdictRefines)
			}
		}
	}
	for _, p := range close {
		if p.cosine >= in.duplicateThreshold && sameContentWords(in.valueText, peerText(p)) && !valuesDiffer(in.valueText, peerText(p)) {
			return acted(p, VerdictDuplicate)
		}
	}
	return conflict()
}

// sameSubject reports whether two rows state facts of one subject, the seeds'
// subject of a row (memory-architecture.md, "A row's peers are its subject"): the
// same user_id, and for the anonymous user ("-", or a user_id sent empty) the same
// agent too. A merge, a duplicate, a refinement or a conflict relates two statements of
// one subject's fact; between two subjects it would fold one user's write into
// another's row (a write answered merged, then 404 at its own key) or flag and retire
// their facts against each other. It is also the scope of the resolver's cluster and of
// what one prompt may hold.
func sameSubject(a, b *memrow.Row) bool {
	if a.UserID != b.UserID {
		return false
	}
	return !anonymous(a.UserID) || a.Agent == b.Agent
}

// startsAfter reports whether the peer's fact is dated later than the row's: a newer
// statement cannot retire it.
func startsAfter(peerRow, row *memrow.Row) bool {
	if peerRow.ValidAt == nil {
		return false
	}
	at := row.UpdatedAt
	if row.ValidAt != nil {
		at = *row.ValidAt
	}
	if at.IsZero() {
		at = time.Now()
	}
	return peerRow.ValidAt.After(at)
}

func round4(f float64) float64 { return float64(int64(f*10000+0.5)) / 10000 }

// contentWords are a text's words that carry meaning (no stopwords), split into the
// values (words with a digit: numbers, dates, versions) and the rest.
func contentWords(s string) (plain, values map[string]bool) { return text.ContentWords(s) }

// sameContentWords: one statement's meaningful words are all in the other's.
func sameContentWords(a, b string) bool {
	pa, _ := contentWords(a)
	pb, _ := contentWords(b)
	return subset(pa, pb) || subset(pb, pa)
}

// valuesDiffer: each side states a value the other lacks ("due on the 3rd" and "due
// on the 5th" are not duplicates, however close their vectors).
func valuesDiffer(a, b string) bool {
	_, va := contentWords(a)
	_, vb := contentWords(b)
	return !subset(va, vb) && !subset(vb, va)
}

func subset(a, b map[string]bool) bool { return text.Subset(a, b) }

// templatedSubstitution reports whether two statements share a template and differ
// in one short slot: the same subject and predicate, another object ("the user
// lives in Lisbon" / "the user lives in Berlin").
func templatedSubstitution(a, b string) bool {
	wa, wb := text.Words(a), text.Words(b)
	p := 0
	for p < len(wa) && p < len(wb) && wa[p] == wb[p] {
		p++
	}
	q := 0
	for q < len(wa)-p && q < len(wb)-p && wa[len(wa)-1-q] == wb[len(wb)-1-q] {
		q++
	}
	ma, mb := len(wa)-p-q, len(wb)-p-q
	return p >= 2 && ma >= 1 && mb >= 1 && ma <= 4 && mb <= 4
}
