package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// The example agent (examples/agent), built and run as an agent developer would: its
// writes are judged, a relevant question is answered from memory, an unrelated one
// abstains, and its writes arrive on the change topic.
func TestExampleAgent(t *testing.T) {
	n, url := env.SharedAPI(t)
	token := env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleWriter})
	ns := testenv.Unique(t, "agent")
	bin := testenv.Build(t, "github.com/loomplane/loom/examples/agent")
	cmd := exec.Command(bin, "--api", url, "--namespace", ns, "--brokers", strings.Join(env.Stack.Kafka.Brokers(), ","))
	cmd.Env = append(cmd.Environ(), "LOOM_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent: %v\n%s", err, out)
	}
	for _, want := range []string{
		"remember editor-theme: written=true verdict=new",
		`ask "which theme does the user like in the editor?": answer from editor-theme`,
		`ask "Oslo office quarterly revenue?": abstain`,
		"topic: seq 1 memory.written key=editor-theme status=active",
		"topic: seq 3 memory.written key=coffee",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the agent's output lacks %q:\n%s", want, out)
		}
	}
}
