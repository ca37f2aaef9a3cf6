package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
)

// An org whose model calls are held makes none: its deferred extraction waits in
// status held (not failed), a retry of a failed one comes back held, and released, both
// run and write their facts. Only an admin token of the whole org flips the switch.
func TestHeldOrgsExtractionWaitsAndResumesOnRelease(t *testing.T) {
	q := newQueueEnv(t, func(c *config.Config) { c.Command.Extraction.MaxAttempts = 1 })
	ctx := context.Background()
	// Answers to spare: on a loaded machine an attempt can time out after its call took
	// a reply, and the next attempt asks again.
	coimbra := extracted([]said{{"user.home_city", "Lives in Coimbra", 0}})
	trondheim := extracted([]said{{"user.work_city", "Works in Trondheim", 0}})
	q.srv.ReplyWhen(saying("Coimbra"), coimbra, coimbra, coimbra)
	q.srv.ReplyWhen(saying("Trondheim"), llmtest.Raw("not json"), trondheim, trondheim, trondheim)
	// The queue is the deployment's: a worker may claim another test's request that came
	// due. It gets no facts; this test's own requests are counted by what they say, in
	// cities no other test's transcript names (another test's "I work in Oslo." took
	// this test's scripted failure once).
	q.srv.Script(func(llmtest.ChatRequest) llmtest.Reply { return extracted(nil) })
	defer q.worker()()

	broken := q.enqueue("bob", "I work in Trondheim.")
	q.await(broken, "failed")

	writer := q.c.Typed(t).WithToken(env.Token(t, q.api, auth.NewToken{Org: q.org, Role: auth.RoleWriter}))
	if _, err := writer.SetModelCalls(ctx, true); !client.IsCode(err, client.CodePermissionDenied) {
		t.Fatalf("a writer token holds the org's model calls: %v, want 403", err)
	}
	held, err := q.tc.SetModelCalls(ctx, true)
	if err != nil || !held.Held || held.HeldAt == nil {
		t.Fatalf("hold: %+v, %v", held, err)
	}
	if got, err := q.tc.ModelCalls(ctx); err != nil || !got.Held {
		t.Fatalf("the switch reads %+v, %v; want held", got, err)
	}
	waiting := q.enqueue("alice", "I live in Coimbra.")
	q.await(waiting, "held")
	if r, err := q.tc.RetryMyExtractions(ctx, []string{broken}); err != nil || len(r.Accepted) != 1 {
		t.Fatalf("retry while held: %+v, %v", r, err)
	}
	q.await(broken, "held")
	// The worker had both in hand and asked the model nothing.
	time.Sleep(300 * time.Millisecond)
	if x := q.status(waiting); x.Status != "held" || x.Attempts != 0 {
		t.Fatalf("a held org's request: %+v, want held with no attempt spent", x)
	}
	// Counted by what they carry: the failed attempt's call may still be landing on a
	// loaded machine, but nothing asks about Coimbra until the release.
	asked := 0
	for _, c := range q.srv.Chats() {
		if saying("Coimbra")(c) {
			asked++
		}
	}
	if asked != 0 {
		t.Fatalf("%d model calls for the request made while held, want none", asked)
	}
	if x := q.status(broken); x.Status != "held" || x.Attempts != 0 {
		t.Fatalf("the retried request while held: %+v, want held with a fresh attempt unspent", x)
	}

	released, err := q.tc.SetModelCalls(ctx, false)
	if err != nil || released.Held || released.Resumed != 2 {
		t.Fatalf("release: %+v, %v; want both held requests resumed", released, err)
	}
	q.await(waiting, "done")
	q.await(broken, "done")
	if m, err := q.tc.Get(ctx, q.ns, "user.home_city", client.Identity{UserID: "alice"}, time.Time{}); err != nil || string(m.Value) != `"Lives in Coimbra"` {
		t.Fatalf("alice's fact after the release: %+v, %v", m, err)
	}
}
