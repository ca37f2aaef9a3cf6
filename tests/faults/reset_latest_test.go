package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// A reset to latest while records of a namespace wait on the topic, unapplied (their
// projector stopped, or between batches), must not leave that namespace behind: its
// watermark never passes a gap, so skipping them left every search of it answering
// PROJECTION_BEHIND for good (the reported case: another org's admin reset the
// shared projection and a dev namespace stayed behind with no self-repair). The
// reset stops each partition's move at the first record the projection has not
// applied, says so in the plan, and the namespace converges once the projector runs.
func TestResetToLatestLeavesNoNamespaceBehind(t *testing.T) {
	p := projection(t)
	n, url := env.API(t, func(c *config.Config) { c.Pipeline.Projection, c.Query.ProjectionWait = p, time.Second })
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	operator := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Role: auth.RoleOperator}))
	pool, group, topic := env.PG(t), projector.Group(p), env.Config(nil).Pipeline.Topic
	env.Relay(t, relay.Faults{})
	stop := env.Projector(t, p)
	ns := testenv.Unique(t, "reset-latest")
	c.AppendOnly(t, ns)
	c.Set(t, ns, "k0", "applied before the reset")
	testenv.Eventually(t, 30*time.Second, "the projection to apply the first write and commit its offsets", func() bool {
		return c.Search(t, ns, "applied", 3).Status == http.StatusOK && env.GroupCaughtUp(t, group, topic)
	})
	stop()
	for i := 1; i <= 5; i++ {
		c.Set(t, ns, fmt.Sprintf("k%d", i), fmt.Sprintf("published while the projector is stopped, number %d", i))
	}
	testenv.Eventually(t, 30*time.Second, "the relay to publish them", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = $2`, org, ns) == 0
	})

	r := operator.Do(t, http.MethodPost, "/v1/admin/projections/"+p+":reset", []byte(`{"to": "latest", "execute": true}`))
	var plan struct {
		projector.ResetPlan
		Executed bool `json:"executed"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &plan) != nil || !plan.Executed {
		t.Fatalf("reset to latest: %d %s", r.Status, r.Body)
	}
	env.Projector(t, p)
	testenv.Eventually(t, 20*time.Second, "the namespace to catch up after the reset", func() bool {
		return c.Search(t, ns, "published while the projector is stopped", 10).Status == http.StatusOK
	})
	testenv.CheckProjection(t, pool, env.CH(t), p, org, ns)
	held := 0
	for _, m := range plan.Partitions {
		if m.Target > m.New {
			held++
		}
	}
	if held == 0 {
		t.Fatalf("no partition's move was held at the unapplied records: %s", r.Body)
	}

}
