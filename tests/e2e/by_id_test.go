package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// memory.verify and memory.redact have by-id forms, addressed by the org-wide memory
// id as memory.update_by_id is (memory-architecture, Invariants): each acts on the one
// live head the token reaches, and an id the token cannot reach is not found (404),
// never forbidden.
func TestVerifyAndRedactByID(t *testing.T) {
	ctx := context.Background()
	n, c, org := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns, other := testenv.Unique(t, "byid"), testenv.Unique(t, "byid-other")
	first, err := tc.Set(ctx, ns, "door-code", client.SetRequest{Value: "the door code is 4711"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Set(ctx, ns, "door-code", client.SetRequest{Value: "the door code is 9090"}); err != nil {
		t.Fatal(err)
	}

	verified, err := tc.VerifyByID(ctx, first.MemoryID)
	if err != nil || !verified.Written || verified.MemoryKey != "door-code" {
		t.Fatalf("verify by id: %+v %v", verified, err)
	}
	head, err := tc.Get(ctx, ns, "door-code", client.Identity{}, time.Time{})
	if err != nil || head.VerifiedBy == "" {
		t.Fatalf("the head after verify by id: %+v %v", head, err)
	}

	redacted, err := tc.RedactByID(ctx, first.MemoryID, first.VersionText)
	if err != nil || redacted.MemoryKey != "door-code" || len(redacted.RedactedVersions) == 0 || redacted.RedactedVersions[0] != first.VersionText {
		t.Fatalf("redact by id: %+v %v", redacted, err)
	}

	// A token that does not reach the namespace finds no such memory.
	elsewhere := testenv.NewClient(c.URL, env.Token(t, n, auth.NewToken{Org: org, Namespaces: []string{other}})).Typed(t)
	if _, err := elsewhere.VerifyByID(ctx, first.MemoryID); !isNotFound(err) {
		t.Fatalf("verify by id of an unreachable memory: %v, want 404", err)
	}
	if _, err := elsewhere.RedactByID(ctx, first.MemoryID, first.VersionText); !isNotFound(err) {
		t.Fatalf("redact by id of an unreachable memory: %v, want 404", err)
	}
	if _, err := tc.VerifyByID(ctx, "not-a-uuid"); !isNotFound(err) {
		t.Fatalf("verify by an id that is not a UUID: %v, want 404", err)
	}
}

func isNotFound(err error) bool {
	e, ok := client.AsError(err)
	return ok && e.Status == 404 && e.Code == client.CodeNotFound
}

// A copy a write's verdict writes of another head (here newest_wins retiring the key
// in another session of the same user) carries the request's principal as its actor,
// never the earlier writer (postgres-authority.md, Audit).
func TestAVerdictsCopyCarriesTheRequestsActor(t *testing.T) {
	ctx := context.Background()
	n, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "copyactor")
	c.Configure(t, ns, map[string]any{"conflict_policy": "newest_wins"})
	first := c.Typed(t)
	second := testenv.NewClient(c.URL, env.Token(t, n, auth.NewToken{Org: org})).Typed(t)
	morning := client.Identity{UserID: "alice", SessionID: "morning"}
	evening := client.Identity{UserID: "alice", SessionID: "evening"}
	if _, err := first.Set(ctx, ns, "desk", client.SetRequest{Value: "alice sits at desk 12", Identity: morning}); err != nil {
		t.Fatal(err)
	}
	actor := func(id client.Identity) (string, string) {
		t.Helper()
		m, err := first.Get(ctx, ns, "desk", id, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return m.Actor, m.Status
	}
	earlyActor, _ := actor(morning)
	if _, err := second.Set(ctx, ns, "desk", client.SetRequest{Value: "alice sits at desk 40", Identity: evening}); err != nil {
		t.Fatal(err)
	}
	lateActor, _ := actor(evening)
	retiredActor, status := actor(morning)
	if status != "superseded" {
		t.Fatalf("newest_wins did not retire the other session's key: %s", status)
	}
	if retiredActor == earlyActor || retiredActor != lateActor {
		t.Fatalf("the retired copy's actor is %q; want the retiring request's %q, not the earlier writer's %q", retiredActor, lateActor, earlyActor)
	}
}
