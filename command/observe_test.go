package command

import (
	"strings"
	"testing"

	"github.com/loomplane/loom/command/extraction"
	"github.com/loomplane/loom/internal/evidence"
)

func TestCheckTurnsNamesTheField(t *testing.T) {
	ok := observedTurn{Role: "user", Content: "hi"}
	for _, tc := range []struct {
		turns []observedTurn
		field string
	}{
		{[]observedTurn{ok}, ""},
		{nil, "turns"},
		{make([]observedTurn, maxObservedTurns+1), "turns"},
		{[]observedTurn{ok, {Role: "robot", Content: "beep"}}, "turns[1].role"},
		{[]observedTurn{{Role: "tool", Content: "\t"}}, "turns[0].content"},
		{[]observedTurn{{Role: "user", Content: strings.Repeat("a", maxTurnChars+1)}}, "turns[0].content"},
		{[]observedTurn{{Role: "user", Content: "a\x00b"}}, "turns[0].content"},
		{[]observedTurn{{Role: "user", Content: "hi", Speaker: strings.Repeat("s", maxSpeakerChars+1)}}, "turns[0].speaker"},
	} {
		err := checkTurns(tc.turns)
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%d turns: %v", len(tc.turns), err)
		case tc.field != "" && fieldOf(err) != tc.field:
			t.Errorf("%d turns: %v, want a refusal of %s", len(tc.turns), err, tc.field)
		}
	}
}

// A fact is linked to the turn it came from: a written version by its version, a merge
// to the memory it merged into with no version; a dropped fact, one with no memory, or
// one naming a message the transcript does not have is not linked.
func TestFactLinks(t *testing.T) {
	rows := []evidence.Turn{{Org: "o", Namespace: "n", TurnID: "t0", UserID: "u", Seq: 7}, {Org: "o", Namespace: "n", TurnID: "t1", UserID: "u", Seq: 7}}
	links := factLinks(rows, []extraction.Fact{
		{MessageIndex: 1, MemoryID: "m1", VersionText: "42"},
		{MessageIndex: 0, MergedInto: "m2", DroppedBy: "loom.hash_dedup"},
		{MessageIndex: 0, DroppedBy: "loom.drop_narration"},
		{MessageIndex: 1, MemoryID: "m3", DroppedBy: "loom.verifier"},
		{MessageIndex: 5, MemoryID: "m4", VersionText: "1"},
	})
	want := []evidence.Link{{Org: "o", Namespace: "n", MemoryID: "m1", Version: 42, TurnID: "t1", UserID: "u", Seq: 7},
		{Org: "o", Namespace: "n", MemoryID: "m2", Version: 0, TurnID: "t0", UserID: "u", Seq: 7}}
	if len(links) != len(want) {
		t.Fatalf("links %+v, want %+v", links, want)
	}
	for i := range want {
		if links[i] != want[i] {
			t.Errorf("link %d: %+v, want %+v", i, links[i], want[i])
		}
	}
}
