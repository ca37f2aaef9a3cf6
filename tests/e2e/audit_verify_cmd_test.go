package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/tests/testenv"
)

// `loomd audit verify`, run as an operator runs it against the deployment's stores:
// on an intact chain it says so and exits 0; after one audit row is changed in
// ClickHouse it exits 1 and names the namespace and the seq of the first broken link;
// put back, the chain verifies again. A flag misused is a usage error (exit 2).
func TestLoomdAuditVerifyNamesTheFirstTamperedRow(t *testing.T) {
	ctx := context.Background()
	_, c, org := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "auditcmd")
	pool, conn := env.PG(t), env.CH(t)
	for i, v := range []string{"the office is in Leeds", "the standup is at nine", "the wiki lives on confluence"} {
		if _, err := tc.Set(ctx, ns, fmt.Sprintf("fact-%d", i), client.SetRequest{Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitProjected(t, pool, "main", org, ns)
	bin := testenv.Build(t, "github.com/loomplane/loom/cmd/loomd")
	verify := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"audit", "verify"}, args...)...)
		cmd.Env = env.LoomdEnv("LOOM_LOG_LEVEL=warn")
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			code = exit.ExitCode()
		default:
			t.Fatalf("run loomd audit verify: %v", err)
		}
		return out.String(), errOut.String(), code
	}

	for _, scope := range [][]string{{"--org", org, "--namespace", ns}, {"--org", org}} {
		out, errOut, code := verify(scope...)
		if code != 0 || !strings.Contains(out, "intact: 1 namespaces, 3 audit rows (0 written before the chain)") {
			t.Fatalf("loomd audit verify %v on an intact chain: exit %d\nstdout: %s\nstderr: %s", scope, code, out, errOut)
		}
	}

	var actor string
	if err := conn.QueryRow(ctx, "SELECT actor FROM loom.audit_log FINAL WHERE org = ? AND namespace = ? AND seq = 2", org, ns).Scan(&actor); err != nil {
		t.Fatal(err)
	}
	setActor := func(to string) {
		t.Helper()
		if _, err := conn.Mutate(ctx, ch.Mutation{Table: "audit_log", Set: "actor = '" + strings.ReplaceAll(to, "'", `\'`) + "'",
			Where: "org = ? AND namespace = ? AND seq = ?", Args: []any{org, ns, uint64(2)}}); err != nil {
			t.Fatal(err)
		}
	}
	setActor("mallory")
	out, errOut, code := verify("--org", org, "--namespace", ns)
	want := fmt.Sprintf("BROKEN: audit chain of %s/%s broken at seq 2: ", org, ns)
	if code != 1 || !strings.HasPrefix(out, want) || !strings.Contains(errOut, "the audit chain is broken") {
		t.Fatalf("loomd audit verify after seq 2's actor was changed: exit %d, want 1 and %q\nstdout: %s\nstderr: %s", code, want, out, errOut)
	}
	// The org-wide walk finds it too.
	if out, _, code := verify("--org", org); code != 1 || !strings.HasPrefix(out, want) {
		t.Fatalf("loomd audit verify --org after the change: exit %d\n%s", code, out)
	}

	setActor(actor)
	if out, errOut, code := verify("--org", org, "--namespace", ns); code != 0 || !strings.Contains(out, "intact") {
		t.Fatalf("loomd audit verify with the row put back: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if out, errOut, code := verify("--namespace", ns); code != 2 || !strings.Contains(errOut, "--namespace needs --org") {
		t.Fatalf("loomd audit verify --namespace without --org: exit %d, want 2\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}
