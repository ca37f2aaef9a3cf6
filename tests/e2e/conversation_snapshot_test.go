package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

// A namespace snapshot carries the conversation's record: restored elsewhere, the
// facts are recalled to the same turns (ids, speakers, times, indexes and windows
// kept) and a question finds its turn; a restore into a namespace that holds the turns
// writes none twice; and a user erased since the snapshot gets no turn back.
func TestSnapshotRestoreCarriesTheConversation(t *testing.T) {
	e := newConversationEnv(t)
	ctx := context.Background()
	s1, _ := e.aliceConversation()
	job := byKey(s1)["user.job"]

	payload := readAll(t, must[*client.Stream](t, "snapshot")(e.tc.SnapshotNamespace(ctx, e.ns)))
	turns := 0
	var end struct {
		Rows    int64 `json:"rows"`
		Records int64 `json:"records"`
	}
	err := client.ReadLines(bytes.NewReader(payload), func(kind string, line json.RawMessage) error {
		switch kind {
		case "turn":
			turns++
		case "end":
			return json.Unmarshal(line, &end)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// alice's s1 (4 turns), s2 (3), s3 (2) and bob's b1 (1).
	if turns != 10 || end.Records != 10 || end.Rows != 2 {
		t.Fatalf("the snapshot holds %d turn lines, its end line %+v; want 10 turns after 2 memories", turns, end)
	}

	dst := testenv.Unique(t, "conv-restored")
	ans := must[*client.RestoreAnswer](t, "restore")(e.tc.RestoreNamespace(ctx, dst, payload))
	if ans.Counts.Restored != 2 || ans.Counts.Turns != 10 || ans.Counts.TurnsUnchanged != 0 {
		t.Fatalf("restore: %+v, want 2 memories and 10 turns written", ans.Counts)
	}
	byFact := must[*client.RecallAnswer](t, "recall by key")(e.tc.Recall(ctx, dst, client.RecallRequest{Key: "user.job",
		Identity: client.Identity{UserID: "alice", SessionID: "s1"}, Window: intp(1)}))
	if len(byFact.Hits) != 1 || byFact.MemoryID != job.MemoryID {
		t.Fatalf("recall by key in the restored namespace: %+v", byFact)
	}
	h := byFact.Hits[0]
	if h.TurnID != s1.TurnIDs[2] || h.Text != "I work as a nurse at Santa Maria hospital." || h.Speaker != "Alice" ||
		h.MessageIndex != 2 || !h.OccurredAt.Equal(*at(2, 8)) {
		t.Errorf("the restored fact's turn: %+v", h.Turn)
	}
	if got := strings.Join(texts(h.Window), " | "); got != "Sounds tiring. Where do you work? | I work as a nurse at Santa Maria hospital. | That is demanding work." {
		t.Errorf("the restored window: %s", got)
	}
	beach := must[*client.RecallAnswer](t, "recall by question")(e.tc.Recall(ctx, dst, client.RecallRequest{Query: "Cascais beach",
		Identity: client.Identity{UserID: "alice"}, Window: intp(5)}))
	if len(beach.Hits) == 0 || beach.Hits[0].Text != "Pixel loves the beach at Cascais." || beach.Hits[0].MessageIndex != 2 ||
		len(beach.Hits[0].Window) != 3 {
		t.Fatalf("recall by question in the restored namespace: %+v", beach)
	}

	// Into the namespace the snapshot was taken of: every turn is held already.
	back := must[*client.RestoreAnswer](t, "restore into the source")(e.tc.RestoreNamespace(ctx, e.ns, payload))
	if back.Counts.Turns != 0 || back.Counts.TurnsUnchanged != 10 {
		t.Errorf("restore into the source: %+v, want its 10 turns unchanged", back.Counts)
	}

	// bob is erased from the source: a restore of the snapshot taken before leaves his
	// turn out.
	e.c.Erasure(t, client.ErasureRequest{UserID: "bob", Namespace: e.ns})
	later := testenv.Unique(t, "conv-after-erasure")
	after := must[*client.RestoreAnswer](t, "restore after the erasure")(e.tc.RestoreNamespace(ctx, later, payload))
	if after.Counts.Turns != 9 || after.Counts.TurnsErasedSkipped != 1 {
		t.Errorf("restore after bob's erasure: %+v, want alice's 9 turns and bob's 1 left out", after.Counts)
	}
	rocket := must[*client.RecallAnswer](t, "recall bob's turn")(e.tc.Recall(ctx, later, client.RecallRequest{Query: "greyhound Rocket"}))
	for _, hit := range rocket.Hits {
		if hit.UserID == "bob" {
			t.Errorf("an erased user's turn came back: %+v", hit.Turn)
		}
	}
}
