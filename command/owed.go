package command

import "github.com/loomplane/loom/internal/memrow"

// owesJudgement reports whether a write's row is marked judgement_owed for the
// conflict resolver by its verdict: a conflict, or, while the resolver is on (floor >
// 0), a peer of its subject at the resolver's floor (LOOM_MEMORY_CONFLICT_RESOLVER_
// MIN_SIMILARITY), however far below the conflict threshold. A proposal, a duplicate
// and a merge are not served facts, and owe nothing. The same key held by another
// session is markSameKey's (admit.go).
func owesJudgement(row *memrow.Row, v verdict, peers []peer, floor float64) bool {
	if row.Status == memrow.StatusProposed {
		return false
	}
	switch v.kind {
	case VerdictConflict:
		return true
	case VerdictNew:
	default:
		return false
	}
	if floor <= 0 {
		return false
	}
	for _, p := range peers {
		if p.cosine >= floor && !p.row.Pinned && sameSubject(p.row, row) {
			return true
		}
	}
	return false
}

// anonymous reports whether a user_id is the anonymous user's.
func anonymous(userID string) bool { return userID == memrow.DefaultIdentity || userID == "" }
