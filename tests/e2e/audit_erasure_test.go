package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/tests/testenv"
)

// An erasure leaves the seed's saga rows in the audit trail of each namespace it
// fences (memory-architecture, "Erasure saga"): erasure.started and erasure.completed,
// naming the request's principal (not "-"), the saga and its status, chained after the
// namespace's other rows, so `loomd audit verify` walks the chain intact; and an
// erasure of a user across the org leaves them in every namespace the user wrote in.
func TestAnErasureLeavesItsStartedAndCompletedRowsNamingItsActor(t *testing.T) {
	ctx := context.Background()
	_, c, org := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	pool, conn := env.PG(t), env.CH(t)
	spaces := []string{testenv.Unique(t, "sagaaudit"), testenv.Unique(t, "sagaaudit")}
	for _, ns := range spaces {
		for i, user := range []string{"alice", "bob"} {
			req := client.SetRequest{Value: fmt.Sprintf("%s keeps the spare key in drawer %d", user, i), Identity: client.Identity{UserID: user}}
			if _, err := tc.Set(ctx, ns, "spare-key", req); err != nil {
				t.Fatal(err)
			}
		}
	}
	view := c.Erasure(t, client.ErasureRequest{UserID: "alice"})
	if !strings.HasPrefix(view.Actor, "token:") {
		t.Fatalf("the erasure's actor is %q, want the request's token", view.Actor)
	}
	for _, ns := range spaces {
		testenv.WaitProjected(t, pool, "main", org, ns)
		var saga []auditchain.Row
		err := auditchain.EachRow(ctx, conn, auditchain.Namespace{Org: org, Namespace: ns}, 0, 0, func(r auditchain.Row) error {
			if strings.HasPrefix(r.Op, "erasure.") {
				saga = append(saga, r)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// erasure.request and erasure.started share the fence's seq; completed follows.
		want := []struct{ op, actor, status string }{
			{auditchain.OpErasure, "-", auditchain.StatusScrubbed},
			{events.OpErasureStarted, view.Actor, "running"},
			{events.OpErasureCompleted, view.Actor, "completed"},
		}
		if len(saga) != len(want) {
			t.Fatalf("%s: the erasure's audit rows are %+v, want %v", ns, saga, want)
		}
		for i, w := range want {
			r := saga[i]
			if r.Op != w.op || r.Actor != w.actor || r.Status != w.status || r.RequestID != view.ID || r.RowHash == "" {
				t.Fatalf("%s: row %d is %s by %q (%s, request %s, hash %q), want %s by %q (%s, request %s)",
					ns, i, r.Op, r.Actor, r.Status, r.RequestID, r.RowHash, w.op, w.actor, w.status, view.ID)
			}
		}
		if saga[1].Seq != saga[0].Seq || saga[2].Seq <= saga[1].Seq || !strings.Contains(saga[2].Detail, `"attempt":1`) {
			t.Fatalf("%s: the saga's rows sit at seqs %d, %d, %d (detail %s)", ns, saga[0].Seq, saga[1].Seq, saga[2].Seq, saga[2].Detail)
		}
	}
	out, code := loomdAuditVerify(t, "--org", org)
	if code != 0 || !strings.Contains(out, "intact: 2 namespaces") {
		t.Fatalf("loomd audit verify --org after the erasure: exit %d\n%s", code, out)
	}
}

// loomdAuditVerify runs `loomd audit verify` with args against the test's stores and
// returns its output and exit status.
func loomdAuditVerify(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testenv.Build(t, "github.com/loomplane/loom/cmd/loomd"), append([]string{"audit", "verify"}, args...)...)
	cmd.Env = env.LoomdEnv("LOOM_LOG_LEVEL=warn")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("run loomd audit verify: %v", err)
	return "", 0
}
