package workers

import (
	"context"
	"strings"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// memory.ask answers from the search's pool only: the prompt holds the pool's values
// and nothing else, a citation of a label outside the pool or of an invented id is
// dropped and counted, the model saying the pool does not answer abstains, and a
// search that abstains abstains with its own code and makes no call. The stream
// carries the search first, then the same answer.
func TestAskCitesOnlyPoolMembersAndAbstainsOnANoAnswerQuery(t *testing.T) {
	w := startWorkers(t, "ask", nil, nil)
	w.srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		switch {
		case r.SchemaName != "grounded_answer":
			return llmtest.Status(500, "unscripted")
		case r.Contains("Question: where does alice live"):
			return llmtest.JSON(map[string]any{"answerable": true, "answer": "alice lives in Lisbon",
				"citations": []string{"m1", "m9", "0b7e6a52-95d4-4b61-9d1c-3f3e2f1f0a11", "[m1]"}})
		default:
			return llmtest.JSON(map[string]any{"answerable": false, "answer": "", "citations": []string{}})
		}
	})
	ctx := context.Background()
	ns := testenv.Unique(t, "ask")
	alice := client.Identity{UserID: "alice"}
	set(t, w.tc, ns, "home", "alice lives in Lisbon", alice)
	set(t, w.tc, ns, "drink", "alice drinks green tea", alice)
	set(t, w.tc, ns, "bob-home", "bob lives in Porto", client.Identity{UserID: "bob"})

	q := client.AskRequest{Query: "where does alice live", UserID: "alice"}
	a, err := w.tc.Ask(ctx, ns, q)
	if err != nil {
		t.Fatal(err)
	}
	if a.Abstained || a.Search == nil || a.Search.Verdict != client.VerdictOK || len(a.Search.Hits) == 0 {
		t.Fatalf("the ask abstained or read no pool: %+v", a)
	}
	top := a.Search.Hits[0]
	if a.Answer != "alice lives in Lisbon" || len(a.Citations) != 1 || a.Citations[0].MemoryID != top.MemoryID || a.CitationsDropped != 2 {
		t.Fatalf("answer %q, citations %+v, dropped %d: want the pool's m1 (%s) once, the label and id outside it dropped",
			a.Answer, a.Citations, a.CitationsDropped, top.MemoryID)
	}
	chats := w.srv.Chats()
	prompt := chats[len(chats)-1].Text()
	for _, h := range a.Search.Hits {
		if !strings.Contains(prompt, value(&h.Memory)) {
			t.Errorf("the prompt lacks pool member %s", h.MemoryKey)
		}
	}
	if strings.Contains(prompt, "Porto") {
		t.Error("the prompt holds a row outside the pool (another user's)")
	}

	var streamed *client.SearchAnswer
	s, err := w.tc.AskStream(ctx, ns, q, func(sa *client.SearchAnswer) { streamed = sa })
	if err != nil || streamed == nil || len(streamed.Hits) != len(a.Search.Hits) || s.Answer != a.Answer ||
		len(s.Citations) != 1 || s.Citations[0] != a.Citations[0] || s.CitationsDropped != 2 {
		t.Fatalf("the stream: search %v, answer %+v, %v", streamed != nil, s, err)
	}

	// The pool holds alice's rows, but not her blood type.
	no, err := w.tc.Ask(ctx, ns, client.AskRequest{Query: "what does alice drink and what is her blood type", UserID: "alice"})
	if err != nil || no.Search.Verdict != client.VerdictOK {
		t.Fatalf("the no-answer ask: %+v %v (the test needs the search to find a pool)", no, err)
	}
	if !no.Abstained || no.AbstainCode != client.AbstainNotAnswered || no.Answer != "" || len(no.Citations) != 0 {
		t.Fatalf("a pool that does not answer: %+v", no)
	}

	calls := len(w.srv.Chats())
	empty, err := w.tc.Ask(ctx, testenv.Unique(t, "ask-empty"), client.AskRequest{Query: "where does alice live"})
	if err != nil || !empty.Abstained || empty.AbstainCode != empty.Search.Verdict || empty.AbstainCode == client.VerdictOK {
		t.Fatalf("a search that abstains: %+v %v", empty, err)
	}
	if n := len(w.srv.Chats()); n != calls {
		t.Fatalf("an abstaining search made %d calls; want none", n-calls)
	}
}
