package evidence

import (
	"strings"
	"testing"
)

func TestCutChunksKeepsTurnsWholeAndCutsALongOneAtWords(t *testing.T) {
	long := strings.Repeat("word ", 9) + "last\n\ttail end"
	turns := []ChunkTurn{
		{TurnID: "a", Role: "user", Text: "I moved to Lisbon", MessageIndex: 0},
		{TurnID: "b", Role: "assistant", Speaker: "Ava", Text: "Nice city", MessageIndex: 1},
		{TurnID: "c", Role: "user", Text: long, MessageIndex: 2},
		{TurnID: "d", Role: "user", Text: "one two three four", MessageIndex: 3},
	}
	got := CutChunks(turns, 5)
	if len(got) != 6 {
		t.Fatalf("want 6 chunks, got %d: %+v", len(got), got)
	}
	if got[0].Text != "user: I moved to Lisbon" || len(got[0].TurnIDs) != 1 {
		t.Fatalf("first chunk %+v", got[0])
	}
	if got[1].Text != "Ava: Nice city" {
		t.Fatalf("the speaker leads a turn: %+v", got[1])
	}
	// 13 words cut into parts of 5: words 1-5, 6-10, 11-13, the text as written.
	if got[2].Part != 0 || got[4].Part != 2 || got[4].TurnIDs[0] != "c" || got[5].Text != "user: one two three four" {
		t.Fatalf("long turn parts %+v", got[2:])
	}
	all := CutChunks(turns, 200)
	if len(all) != 1 || len(all[0].TurnIDs) != 4 || all[0].FirstIndex != 0 || all[0].LastIndex != 3 {
		t.Fatalf("turns that fit share one chunk: %+v", all)
	}
	if !strings.Contains(all[0].Text, "last\n\ttail end") {
		t.Fatalf("a chunk keeps the text verbatim: %q", all[0].Text)
	}
	parts := CutChunks(turns[2:3], 5)
	if len(parts) != 3 || parts[1].Text != "user: word word word word last" || parts[2].Text != "user: tail end" {
		t.Fatalf("parts %q", []string{parts[0].Text, parts[1].Text, parts[2].Text})
	}
}
