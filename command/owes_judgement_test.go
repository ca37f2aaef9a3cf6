package command

import (
	"testing"

	"github.com/loomplane/loom/internal/memrow"
)

func TestWritesOweAJudgementForAConflictOrAPeerAtTheFloor(t *testing.T) {
	row := &memrow.Row{Identity: memrow.Identity{Agent: "a", UserID: "alice", SessionID: "s1"}, Status: memrow.StatusActive}
	peerOf := func(user, agent string, cos float64, pinned bool) peer {
		return peer{row: &memrow.Row{Identity: memrow.Identity{Agent: agent, UserID: user}, Pinned: pinned}, cosine: cos}
	}
	newV := verdict{kind: VerdictNew}
	for _, tc := range []struct {
		name  string
		row   *memrow.Row
		v     verdict
		peers []peer
		floor float64
		want  bool
	}{
		{"a conflict always owes", row, verdict{kind: VerdictConflict}, nil, 0, true},
		{"a peer of the same user at the floor", row, newV, []peer{peerOf("alice", "b", 0.61, false)}, 0.6, true},
		{"below the floor", row, newV, []peer{peerOf("alice", "a", 0.59, false)}, 0.6, false},
		{"the resolver off", row, newV, []peer{peerOf("alice", "a", 0.9, false)}, 0, false},
		{"another user's row is not the subject", row, newV, []peer{peerOf("bob", "a", 0.9, false)}, 0.6, false},
		{"a pinned row is no peer", row, newV, []peer{peerOf("alice", "a", 0.9, true)}, 0.6, false},
		{"a duplicate owes nothing", row, verdict{kind: VerdictDuplicate}, []peer{peerOf("alice", "a", 0.99, false)}, 0.6, false},
		{"a proposal owes nothing", &memrow.Row{Status: memrow.StatusProposed}, verdict{kind: VerdictConflict}, nil, 0.6, false},
	} {
		if got := owesJudgement(tc.row, tc.v, tc.peers, tc.floor); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	anon := &memrow.Row{Identity: memrow.Identity{Agent: "a", UserID: "-"}}
	if owesJudgement(anon, newV, []peer{peerOf("-", "b", 0.9, false)}, 0.6) {
		t.Error("the anonymous user's subject is one agent: another agent's row is no peer")
	}
	if !owesJudgement(anon, newV, []peer{peerOf("-", "a", 0.9, false)}, 0.6) {
		t.Error("the anonymous user's row of the same agent is a peer")
	}
}
