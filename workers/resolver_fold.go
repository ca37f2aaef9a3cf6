package workers

import "github.com/loomplane/loom/command"

// The fold is the conflict resolver's rule (memory-architecture, "The fold"): what one
// verdict of the model on a pair (the judged row, NEW, and one peer) does, precision
// first. It reads no store.

// judgeVerdict is what the model says of a pair.
type judgeVerdict string

// Verdicts the answer's schema allows.
const (
	verdictUpdate        judgeVerdict = "update"        // NEW makes the peer stale
	verdictContradiction judgeVerdict = "contradiction" // both cannot hold; neither replaces the other
	verdictElaboration   judgeVerdict = "elaboration"
	verdictRestatement   judgeVerdict = "restatement"
	verdictRelated       judgeVerdict = "related"
	verdictUnrelated     judgeVerdict = "unrelated"
)

func judgeVerdicts() []string {
	return []string{string(verdictUpdate), string(verdictContradiction), string(verdictElaboration),
		string(verdictRestatement), string(verdictRelated), string(verdictUnrelated)}
}

// peerJudgement is one usable entry of the model's answer.
type peerJudgement struct {
	Verdict       judgeVerdict
	SameEntity    bool
	SameAttribute bool
	Confidence    float64
}

// pairAction is what the resolver does to a pair.
type pairAction string

const (
	actNone   pairAction = "none"
	actRetire pairAction = "retire" // the peer is superseded behind NEW (memory.auto_supersede)
	actFlag   pairAction = "flag"   // both rows conflicted, each naming the other
	actClear  pairAction = "clear"  // the flag between the pair is removed
)

// thresholds are the resolver's confidences, highest first (config validates the order).
type thresholds struct {
	retire, flag, clear float64
}

// pairFacts are what the fold needs to know of a pair besides the answer.
type pairFacts struct {
	policy string
	// anonymous: the judged row's user is the anonymous one, whose sessions are
	// separate tasks; otherSession: the peer comes from another session.
	anonymous, otherSession bool
	// peerFirst: the peer's value was asserted strictly before NEW's.
	peerFirst bool
	// sameValidDay: both writers dated their fact (valid_at) on the same day, which
	// gives the pair no order.
	sameValidDay bool
	// flagged: a flag between the pair exists (either row's conflict_with names the other).
	flagged bool
}

// fold decides a pair. A peer the answer left out (j nil) changes nothing.
func fold(j *peerJudgement, f pairFacts, t thresholds) pairAction {
	if j == nil {
		return actNone
	}
	stale := j.Verdict == verdictUpdate || j.Verdict == verdictContradiction
	switch {
	case stale && (!j.SameEntity || !j.SameAttribute):
		return actNone // the answer contradicts itself
	case stale && f.anonymous && f.otherSession:
		return actNone // an agent's sessions are separate tasks
	case j.Confidence < t.clear:
		return actNone
	case stale && j.Confidence < t.flag:
		return actNone
	case j.Verdict == verdictUpdate && j.Confidence >= t.retire && (f.policy == command.PolicyAutoReinforce || f.policy == command.PolicyNewestWins) &&
		f.peerFirst && !f.sameValidDay:
		return actRetire
	case stale:
		return actFlag
	case f.flagged:
		return actClear
	}
	return actNone
}
