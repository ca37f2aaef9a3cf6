package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// A saga whose step fails leaves the seed's rows (memory-architecture, "Erasure
// saga") in the namespace's audit chain: erasure.failed naming the request's actor
// and the step, then erasure_recovery's erasure.recovered naming itself, and the
// resumed run's erasure.completed naming the request's actor again; a saga out of
// runs leaves erasure.abandoned instead, by erasure_recovery, its status failed. The
// step fails as it does when the projection is behind: no projector of the saga's
// projection runs until the run has failed, so its ClickHouse step times out.
func TestAFailedErasureLeavesItsFailedRecoveredAndAbandonedRows(t *testing.T) {
	env.Relay(t, relay.Faults{})
	for _, c := range []struct {
		name        string
		maxAttempts int
		want        []sagaRow // after erasure.request and erasure.started
	}{
		{"recovered", 5, []sagaRow{{events.OpErasureFailed, "", "running", 1, "clickhouse"},
			{events.OpErasureRecovered, "worker:erasure_recovery", "running", 2, ""}, {events.OpErasureCompleted, "", "completed", 2, ""}}},
		{"abandoned", 1, []sagaRow{{events.OpErasureFailed, "", "running", 1, "clickhouse"},
			{events.OpErasureAbandoned, "worker:erasure_recovery", "failed", 1, ""}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := projection(t)
			saga := func(cfg *config.Config) {
				cfg.Pipeline.Projection = p
				// A run lasts one lease: long enough for a census on a loaded machine,
				// and the first run's ClickHouse step, with no projector, fails at its end.
				cfg.Command.Erasure.Lease = 8 * time.Second
				cfg.Command.Erasure.StepTimeout = 8 * time.Second
				cfg.Command.Erasure.RequestWait = 100 * time.Millisecond
				cfg.Command.Erasure.MaxAttempts = c.maxAttempts
				cfg.Command.Erasure.RecoveryInterval = 0
			}
			_, api, org := env.OrgAPI(t, saga)
			ns := testenv.Unique(t, "sagarows")
			api.AppendOnly(t, ns)
			ctx, tc := context.Background(), api.Typed(t)
			for _, user := range []string{"alice", "bob"} {
				if _, err := tc.Set(ctx, ns, user+"-locker", typed.SetRequest{Value: user + " uses locker 12", Identity: typed.Identity{UserID: user}}); err != nil {
					t.Fatal(err)
				}
			}
			first, err := tc.RequestErasure(ctx, typed.ErasureRequest{UserID: "alice", Namespace: ns})
			if err != nil || !first.Running {
				t.Fatalf("an erasure whose projection is behind answered %+v %v, want 202", first, err)
			}
			testenv.Eventually(t, 60*time.Second, "the saga's ClickHouse step to fail", func() bool {
				view, err := tc.Erasure(ctx, first.ID)
				return err == nil && strings.HasPrefix(view.LastError, "clickhouse:")
			})
			env.Projector(t, p)
			testenv.WaitProjected(t, env.PG(t), p, org, ns)
			// erasure_recovery runs in another process once the projection caught up.
			env.API(t, func(cfg *config.Config) { saga(cfg); cfg.Command.Erasure.RecoveryInterval = 200 * time.Millisecond })
			var view *typed.Erasure
			testenv.Eventually(t, 90*time.Second, "the saga to finish", func() bool {
				view, err = tc.Erasure(ctx, first.ID)
				return err == nil && view.Status != "running"
			})
			testenv.WaitProjected(t, env.PG(t), p, org, ns)
			want := append([]sagaRow{{auditchain.OpErasure, "-", auditchain.StatusScrubbed, 0, ""},
				{events.OpErasureStarted, "", "running", 1, ""}}, c.want...)
			for i := range want {
				if want[i].actor == "" {
					want[i].actor = view.Actor
				}
			}
			if got := sagaRows(t, org, ns, first.ID); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the saga's audit rows (saga %s, %d runs):\n got  %v\n want %v", view.Status, view.Attempts, got, want)
			}
			if _, err := auditchain.Verify(ctx, env.CH(t), env.PG(t), org, ns); err != nil {
				t.Fatalf("the chain with the saga's rows: %v", err)
			}
		})
	}
}

// sagaRow is one of an erasure saga's audit rows: its op, actor, the saga's status
// after it, and (from its note) the run and the failed step.
type sagaRow struct {
	op, actor, status string
	attempt           int
	step              string
}

// sagaRows reads the namespace's audit rows of erasure id, in chain order.
func sagaRows(t *testing.T, org, ns, id string) []sagaRow {
	t.Helper()
	var out []sagaRow
	err := auditchain.EachRow(context.Background(), env.CH(t), auditchain.Namespace{Org: org, Namespace: ns}, 0, 0, func(r auditchain.Row) error {
		if r.RequestID != id {
			return nil
		}
		row := sagaRow{op: r.Op, actor: r.Actor, status: r.Status}
		if r.Detail != "" {
			var note events.AuditNote
			if err := json.Unmarshal([]byte(r.Detail), &note); err != nil || note.Erasure == nil {
				return fmt.Errorf("the detail of %s at seq %d: %s %v", r.Op, r.Seq, r.Detail, err)
			}
			row.attempt, row.step = note.Erasure.Attempt, note.Erasure.Step
		}
		out = append(out, row)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
