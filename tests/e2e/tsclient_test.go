package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// Loom's own TypeScript client (clients/typescript) is built here as a user builds it:
// its types generated from schemas/openapi.yaml as it stands, the wrapper and its tests
// compiled by tsc against them (a route or a field the spec no longer has fails the
// compile), then its tests run by node against a loomd on the real stores.
func TestTypeScriptClient(t *testing.T) {
	n, url := env.SharedAPI(t)
	writer := env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleWriter})
	reader := env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleReader})
	operator := env.Token(t, n, auth.NewToken{Role: auth.RoleOperator})
	admin := env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleAdmin})
	learningsNS := fileALearning(t, "acme")
	dir := tsClient(t)

	cmd := exec.Command("npm", "test")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LOOM_URL="+url, "LOOM_TOKEN="+writer, "LOOM_READER_TOKEN="+reader,
		"LOOM_OPERATOR_TOKEN="+operator, "LOOM_ADMIN_TOKEN="+admin, "LOOM_NS="+testenv.Unique(t, "ts-client"), "LOOM_LEARNINGS_NS="+learningsNS, "HOME="+t.TempDir(), "NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("npm test of clients/typescript: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("npm test of clients/typescript did not finish in 10 minutes\n%s", out.String())
	}
	if !strings.Contains(out.String(), "# fail 0") {
		t.Fatalf("npm test of clients/typescript reported a failure\n%s", out.String())
	}
	t.Logf("npm test of clients/typescript:\n%s", out.String())
}

// fileALearning files one rule about the agent to a fresh namespace of org's learnings
// queue, through a process whose scripted model extracts it from alice's message, and
// answers the namespace: the client's test reads it through the process that has no model.
func fileALearning(t *testing.T, org string) string {
	t.Helper()
	srv := llmtest.New(t)
	n, url := env.API(t, func(c *config.Config) {
		withProvider(srv)(c)
		c.Command.Extraction.QueueEnabled = false
	})
	srv.ReplyWhen(saying("French"), llmtest.JSON(map[string]any{"forget": []any{}, "facts": []any{
		map[string]any{"key": "assistant.reply_language", "value": "Answer in French", "message_index": 0, "tags": []any{}, "about": "agent"},
	}}))
	ns := testenv.Unique(t, "ts-learnings")
	tc := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org})).Typed(t)
	a, err := tc.FromMessages(context.Background(), ns, client.FromMessagesRequest{Identity: client.Identity{UserID: "alice"},
		Messages: messages("From now on, always answer me in French please.")})
	if err != nil || len(a.Facts) != 1 || a.Facts[0].Verdict != "learning" {
		t.Fatalf("file a learning: %+v, %v", a, err)
	}
	return ns
}

// tsClient copies clients/typescript and the spec into a fresh folder laid out as the
// repository is (the client's generate script reads ../../schemas/openapi.yaml), with
// its packages installed from its lock into a cache folder outside the tree
// (testenv.NodeModules; the test builds the client, its prepare script does not run).
func tsClient(t *testing.T) string {
	t.Helper()
	const src = "../../clients/typescript"
	modules := testenv.NodeModules(t, "ts-client", src)

	root := t.TempDir()
	dir := filepath.Join(root, "clients", "typescript")
	for _, f := range []string{"package.json", "package-lock.json", ".npmrc", "tsconfig.json"} {
		copyInto(t, filepath.Join(src, f), filepath.Join(dir, f))
	}
	for _, sub := range []string{"src", "test"} {
		files, _ := filepath.Glob(filepath.Join(src, sub, "*.ts"))
		for _, f := range files {
			if strings.HasSuffix(f, ".gen.ts") {
				continue // a developer's generated copy: the test generates its own
			}
			copyInto(t, f, filepath.Join(dir, sub, filepath.Base(f)))
		}
	}
	copyInto(t, "../../schemas/openapi.yaml", filepath.Join(root, "schemas", "openapi.yaml"))
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyInto(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(from, to); err != nil {
		t.Fatal(err)
	}
}
