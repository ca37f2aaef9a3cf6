package e2e

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// A write is judged against the heads its key holds when it commits, under every
// identity: a fact another process writes under the key, between the write's round
// and its commit, refuses a proposal of that key (KEY_HOLDS_FACT), whether the round
// read the key's heads or took it for a new key without reading them. The commit
// checks the key's heads under its lock and sends the write back to read them.
func TestAProposalIsRefusedOverAFactAnotherProcessWroteBeforeItsCommit(t *testing.T) {
	ctx := context.Background()
	ns := testenv.Unique(t, "predicted")
	otherN, otherURL := env.API(t, nil)
	theirs := testenv.NewClient(otherURL, env.Token(t, otherN, auth.NewToken{Org: "acme"})).Typed(t)
	var commits atomic.Int32
	var fact *client.SetAnswer
	n, url := env.API(t, nil, app.WithCommandFaults(command.Faults{BeforeCommit: func() {
		if commits.Add(1) != 2 {
			return
		}
		var err error
		fact, err = theirs.Set(ctx, ns, "office", client.SetRequest{Value: "the office opens at 8",
			Identity: client.Identity{UserID: "bob"}})
		if err != nil {
			t.Errorf("the other process's fact: %v", err)
		}
	}}))
	mine := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"})).Typed(t)
	// The namespace's first write: the process reads its policy and holds it since.
	if _, err := mine.Set(ctx, ns, "garden", client.SetRequest{Value: "the garden gate squeaks when it rains"}); err != nil {
		t.Fatal(err)
	}
	a, err := mine.Set(ctx, ns, "office", client.SetRequest{Value: "the office opens at 9",
		Identity: client.Identity{UserID: "alice"}, Proposed: true})
	if fact == nil {
		t.Fatal("the other process did not write its fact")
	}
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusConflict || ce.Code != "KEY_HOLDS_FACT" {
		t.Fatalf("the proposal over bob's fact answered %+v, %v; want 409 KEY_HOLDS_FACT", a, err)
	}
	hist, err := mine.History(ctx, ns, "office", client.Identity{UserID: "alice"})
	if err == nil && len(hist.Versions) > 0 {
		t.Fatalf("the refused proposal was written: %+v", hist.Versions)
	}
}
