package boot

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// A write whose wait for the stopped standby ran out is committed and visible on the
// primary at once. The relay holds it back, saying why, and the topic does not get it
// until the standby is back and has flushed it; then it is published.
func TestRelayHoldsATimedOutWriteUntilTheStandbyHoldsIt(t *testing.T) {
	ctx := context.Background()
	requireStandbyAttached(t)
	n, url := env.API(t, func(c *config.Config) { c.Command.WriteDeadline = 1500 * time.Millisecond })
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	_, relayURL, _ := env.Serve(t, []string{string(config.RoleRelay)}, nil)
	health := env.Operator(t, relayURL)
	ns := testenv.Unique(t, "held")
	c.AppendOnly(t, ns)
	published := func(seq int64) bool {
		for _, r := range env.TopicRecords(t) {
			if e, err := events.Decode(r.Value); err == nil && e.Org == org && e.Namespace == ns && e.Seq == seq {
				return true
			}
		}
		return false
	}
	relayHolds := func() map[string]any {
		pgState, _ := health.Do(t, http.MethodGet, "/v1/health?include=postgres", nil).JSON(t)["postgres"].(map[string]any)
		held, _ := pgState["relay"].(map[string]any)
		return held
	}
	c.Set(t, ns, "attached", "written with the standby attached")
	testenv.Eventually(t, 30*time.Second, "seq 1 on the topic", func() bool { return published(1) })

	if err := env.Stack.Standby.Stop(); err != nil {
		t.Fatal(err)
	}
	r := c.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/cut", []byte(`{"value": "committed on the primary alone"}`))
	if e, _ := r.JSON(t)["error"].(map[string]any); r.Status != http.StatusServiceUnavailable || e["outcome_unknown"] != true {
		t.Fatalf("write with the standby stopped: %d %s; want 503 with outcome_unknown", r.Status, r.Body)
	}
	var held map[string]any
	testenv.Eventually(t, 30*time.Second, "the relay to hold the timed-out write", func() bool {
		held = relayHolds()
		return held != nil && held["held_rows"] == float64(1)
	})
	if held["reason"] != "standby_detached" {
		t.Fatalf("held for %q, want standby_detached", held["reason"])
	}
	if !published(1) || published(2) {
		t.Fatal("the write only the primary holds is on the topic")
	}

	if err := env.Stack.Standby.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "seq 2 on the topic once the standby holds it", func() bool { return published(2) })
	if held := relayHolds(); held["held_rows"] != float64(0) || held["reason"] != nil {
		t.Fatalf("the relay still reports a hold after publishing: %v", held)
	}
}
