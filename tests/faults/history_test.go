package faults

import (
	"context"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// memory.history answers from the journal on the authority: with the projector stopped
// it answers every version a write answered, at once, a redacted one scrubbed,
// where it used to wait at the barrier and answer 503 PROJECTION_BEHIND.
func TestHistoryAnswersWhileTheProjectorIsStopped(t *testing.T) {
	p := projection(t)
	c := client(t, func(cfg *config.Config) {
		cfg.Pipeline.Projection = p
		cfg.Query.ProjectionWait = 300 * time.Millisecond
	})
	ns := testenv.Unique(t, "history")
	c.AppendOnly(t, ns)
	env.Relay(t, relay.Faults{})
	ctx, tc := context.Background(), c.Typed(t)

	first, err := tc.Set(ctx, ns, "k", typed.SetRequest{Value: "the first text"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Set(ctx, ns, "k", typed.SetRequest{Value: "the second text"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Delete(ctx, ns, "k", typed.Identity{}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Restore(ctx, ns, "k", typed.Identity{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Redact(ctx, ns, "k", typed.RedactRequest{Version: first.VersionText}); err != nil {
		t.Fatalf("redact: %v", err)
	}
	if wm := testenv.Watermark(t, env.PG(t), p, org, ns); wm != 0 {
		t.Fatalf("the projection %s is at %d: it should have seen nothing", p, wm)
	}

	h, err := tc.History(ctx, ns, "k", typed.Identity{})
	if err != nil {
		t.Fatalf("history with the projector stopped: %v", err)
	}
	if len(h.Versions) != 4 {
		t.Fatalf("history holds %d versions, want 4: %+v", len(h.Versions), h.Versions)
	}
	want := []struct {
		event     string
		value     string
		tombstone bool
		redacted  bool
	}{
		{"memory.written", "null", false, true},
		{"memory.revised", `"the second text"`, false, false},
		{"memory.tombstoned", "", true, false},
		{"memory.restored", `"the second text"`, false, false},
	}
	for i, w := range want {
		v := h.Versions[i]
		if (w.event != "" && v.Event != w.event) || (w.value != "" && string(v.Value) != w.value) || v.Tombstone != w.tombstone || v.Redacted != w.redacted {
			t.Errorf("version %d: %s value %s tombstone %v redacted %v; want %+v", i, v.Event, v.Value, v.Tombstone, v.Redacted, w)
		}
	}
	if h.Versions[0].VersionText != first.VersionText || h.Barrier.Generations[ns] == 0 {
		t.Errorf("history: first version %s (want %s), barrier %+v", h.Versions[0].VersionText, first.VersionText, h.Barrier)
	}
	// A key with no version is not found.
	if _, err := tc.History(ctx, ns, "never-written", typed.Identity{}); !typed.IsCode(err, typed.CodeNotFound) {
		t.Fatalf("history of a key never written: %v", err)
	}
}
