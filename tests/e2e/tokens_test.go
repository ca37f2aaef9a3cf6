package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// A token revoked through one process is refused by another within the stated bound
// (LOOM_AUTH_TOKEN_CACHE_MS): at once when the revocation's NOTIFY reaches it, and
// within the bound when nothing tells it (a revocation written straight into Postgres).
func TestRevokedTokenIsRefusedByAnotherProcess(t *testing.T) {
	ctx := context.Background()
	const bound = time.Second
	a, urlA := env.API(t, nil)
	_, urlB := env.API(t, func(c *config.Config) { c.HTTP.TokenCache = bound })
	org := testenv.Unique(t, "org")
	admin := must[*client.Client](t, "client")(client.New(urlA, env.Token(t, a, auth.NewToken{Org: org}), client.WithStrictDecoding()))
	ns := testenv.Unique(t, "tok")

	// answersOnB reports whether process B still takes the token (a missing key is 404,
	// a refused token 401).
	answersOnB := func(secret string) bool {
		b := must[*client.Client](t, "client")(client.New(urlB, secret))
		_, err := b.Get(ctx, ns, "absent", client.Identity{}, time.Time{})
		e, ok := client.AsError(err)
		if !ok {
			t.Fatalf("GET on B: %v", err)
		}
		if e.Status != http.StatusNotFound && e.Status != http.StatusUnauthorized {
			t.Fatalf("GET on B: %v", err)
		}
		return e.Status == http.StatusNotFound
	}
	refusedWithin := func(what, secret string, limit time.Duration) {
		t.Helper()
		start := time.Now()
		testenv.Eventually(t, limit, what, func() bool { return !answersOnB(secret) })
		t.Logf("%s: refused by B after %s (bound %s)", what, time.Since(start).Round(time.Millisecond), bound)
	}

	notified := must[*client.CreatedToken](t, "create")(admin.CreateToken(ctx, client.TokenRequest{Role: auth.RoleWriter, Name: "notified"}))
	silent := must[*client.CreatedToken](t, "create")(admin.CreateToken(ctx, client.TokenRequest{Role: auth.RoleReader, Name: "silent"}))
	expiring := must[*client.CreatedToken](t, "create")(admin.CreateToken(ctx, client.TokenRequest{Role: auth.RoleReader, TTLSeconds: 2}))
	if !strings.HasPrefix(notified.Token, "loom_") || notified.Org != org || expiring.ExpiresAt == nil {
		t.Fatalf("created: %+v %+v", notified, expiring)
	}
	for _, tok := range []*client.CreatedToken{notified, silent, expiring} {
		if !answersOnB(tok.Token) {
			t.Fatalf("process B refuses the new token %s", tok.TokenID)
		}
	}

	revoked := must[*client.TokenInfo](t, "revoke")(admin.RevokeToken(ctx, notified.TokenID))
	if revoked.RevokedAt == nil {
		t.Fatalf("revoke answered %+v", revoked)
	}
	refusedWithin("a revocation through process A", notified.Token, bound+2*time.Second)

	// The revocation emptied B's cache: B checks the silent token again, and caches it.
	if !answersOnB(silent.Token) {
		t.Fatal("process B refuses a live token")
	}
	testenv.Exec(t, env.PG(t), `UPDATE loom.api_tokens SET revoked_at = now() WHERE token_id = $1`, silent.TokenID)
	refusedWithin("a revocation no process was told of", silent.Token, bound+2*time.Second)
	refusedWithin("an expired token", expiring.Token, 2*time.Second+bound+2*time.Second)

	list := must[*client.TokenList](t, "list")(admin.Tokens(ctx))
	byID := map[string]client.TokenInfo{}
	for _, tk := range list.Tokens {
		byID[tk.TokenID] = tk
	}
	if byID[notified.TokenID].RevokedAt == nil || byID[silent.TokenID].RevokedAt == nil || byID[expiring.TokenID].ExpiresAt == nil || list.CacheTTLMS != 10000 {
		t.Errorf("list: %+v", list)
	}
	narrow := admin.WithToken(env.Token(t, a, auth.NewToken{Org: org, Namespaces: []string{ns}}))
	if _, err := narrow.Tokens(ctx); !isCode(err, client.CodePermissionDenied) {
		t.Errorf("a namespace-bound admin listing the org's tokens: %v, want 403", err)
	}
	if _, err := admin.CreateToken(ctx, client.TokenRequest{Role: "operator"}); !isCode(err, client.CodeValidationFailed) {
		t.Errorf("an org admin creating an operator token: %v, want 422", err)
	}
	if _, err := admin.RevokeToken(ctx, "000000000000"); !isCode(err, client.CodeNotFound) {
		t.Errorf("revoking an unknown token: %v, want 404", err)
	}
}

// The operator commands run against the stores: they check the recorded authority
// first (exit 2 on a mismatch), rotate a token, and take a namespace's snapshot to a
// file and restore it into another, gzipped.
func TestOperatorCommands(t *testing.T) {
	ctx := context.Background()
	bin := testenv.Build(t, "github.com/loomplane/loom/cmd/loomd")
	loomd := func(extra []string, args ...string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env.LoomdEnv(extra...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	n, raw, org := env.SharedOrgAPI(t)
	c := raw.Typed(t)
	ns, restored := testenv.Unique(t, "cli"), testenv.Unique(t, "cli-restored")
	must[*client.SetAnswer](t, "set")(c.Set(ctx, ns, "k", client.SetRequest{Value: "a memory the CLI backs up", Identity: client.Identity{UserID: "u1"}}))

	for _, args := range [][]string{{"token", "list"}, {"namespace", "snapshot", "--org", org, "--namespace", ns}} {
		_, stderr, err := loomd([]string{"LOOM_DEPLOYMENT_ID=00000000-0000-0000-0000-000000000000"}, args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr, "records deployment") {
			t.Errorf("loomd %v under another deployment id: %v, stderr %q; want exit 2", args, err, stderr)
		}
	}

	secret := env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter, Name: "rotated"})
	p, err := n.Tokens.Authenticate(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := loomd(nil, "token", "rotate", p.TokenID, "--expires-in", "1h")
	if err != nil {
		t.Fatalf("token rotate: %v\n%s", err, stderr)
	}
	fresh := strings.TrimSpace(stdout)
	if _, err := raw.Typed(t).WithToken(fresh).Get(ctx, ns, "k", client.Identity{UserID: "u1"}, time.Time{}); err != nil {
		t.Errorf("the rotated token's new secret: %v", err)
	}
	testenv.Eventually(t, 12*time.Second, "the rotated secret refused", func() bool {
		_, err := raw.Typed(t).WithToken(secret).Get(ctx, ns, "k", client.Identity{UserID: "u1"}, time.Time{})
		return isCode(err, client.CodeUnauthenticated)
	})
	stdout, _, err = loomd(nil, "token", "list", "--org", org)
	if err != nil || !strings.Contains(stdout, p.TokenID) || strings.Contains(stdout, "loom_") {
		t.Errorf("token list: %v\n%s", err, stdout)
	}

	file := filepath.Join(t.TempDir(), "snapshot.jsonl.gz")
	if _, stderr, err := loomd(nil, "namespace", "snapshot", "--org", org, "--namespace", ns, "--out", file, "--gzip"); err != nil {
		t.Fatalf("namespace snapshot: %v\n%s", err, stderr)
	}
	stdout, stderr, err = loomd(nil, "namespace", "restore", "--org", org, "--namespace", restored, "--in", file)
	if err != nil {
		t.Fatalf("namespace restore: %v\n%s", err, stderr)
	}
	var ans client.RestoreAnswer
	if err := json.Unmarshal([]byte(stdout), &ans); err != nil || ans.Counts.Restored != 1 || ans.Source != ns {
		t.Fatalf("namespace restore answered %s (%v)", stdout, err)
	}
	if m, err := c.Get(ctx, restored, "k", client.Identity{UserID: "u1"}, time.Time{}); err != nil || string(m.Value) != `"a memory the CLI backs up"` {
		t.Errorf("the restored memory: %v %+v", err, m)
	}
	out := filepath.Join(t.TempDir(), "export.jsonl")
	if _, stderr, err := loomd(nil, "export", "--org", org, "--user-id", "u1", "--out", out); err != nil {
		t.Fatalf("export: %v\n%s", err, stderr)
	}
	if b, _ := os.ReadFile(out); !bytes.Contains(b, []byte("a memory the CLI backs up")) || bytes.Count(b, []byte(`"kind":"memory"`)) != 2 {
		t.Errorf("the export holds %s, want the user's memory in both namespaces", b)
	}
}
