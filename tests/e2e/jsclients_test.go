package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The clients no one here wrote run under node from js/: package.json and its lock
// pin them, and npm installs them into a cache folder outside the tree (keyed by the
// lock, so a change of versions installs afresh). Without node or npm the suite
// installs them (scripts/install-deps.sh); an install that fails fails the test.

var (
	jsOnce sync.Once
	jsDir  string
	jsErr  string
)

// jsClients returns the folder the scripts of js/ run from, with their packages installed.
func jsClients(t *testing.T) string {
	t.Helper()
	jsOnce.Do(func() { jsDir, jsErr = installJS() })
	if jsErr != "" {
		t.Fatal(jsErr)
	}
	return jsDir
}

func installJS() (string, string) {
	if _, err := exec.LookPath("npm"); err != nil {
		if out, err := exec.Command("../../scripts/install-deps.sh").CombinedOutput(); err != nil {
			return "", "node and npm are missing and scripts/install-deps.sh could not install them: " + err.Error() + "\n" + string(out)
		}
	}
	lock, err := os.ReadFile("js/package-lock.json")
	if err != nil {
		return "", err.Error()
	}
	sum := sha256.Sum256(lock)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "loom", "e2e-js-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".installed")); err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", err.Error()
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
		if err != nil {
			return "", err.Error()
		}
		for _, f := range []string{"package.json", "package-lock.json", ".npmrc"} {
			if err := copyFile("js/"+f, filepath.Join(tmp, f)); err != nil {
				return "", err.Error()
			}
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(tmp)
			return "", "npm ci of tests/e2e/js failed: " + err.Error() + "\n" + string(out)
		}
		os.WriteFile(filepath.Join(tmp, "node_modules", ".installed"), nil, 0o644)
		os.RemoveAll(dir)
		if err := os.Rename(tmp, dir); err != nil {
			return "", err.Error()
		}
	}
	scripts, _ := filepath.Glob("js/*.mjs")
	for _, s := range scripts {
		if err := copyFile(s, filepath.Join(dir, filepath.Base(s))); err != nil {
			return "", err.Error()
		}
	}
	return dir, ""
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// runNode runs a script of js/ with args and returns its standard output; a failure
// fails the test with what it printed.
func runNode(t *testing.T, script string, env []string, args ...string) []byte {
	t.Helper()
	dir := jsClients(t)
	cmd := exec.Command("node", append([]string{filepath.Join(dir, script)}, args...)...)
	cmd.Dir = dir
	// No telemetry leaves the machine, and the client's config stays in the test's folder.
	cmd.Env = append(os.Environ(), append([]string{"MEM0_TELEMETRY=false", "MEM0_DIR=" + t.TempDir(), "HOME=" + t.TempDir()}, env...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
		}
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("node %s did not finish in 3 minutes\nstdout:\n%s\nstderr:\n%s", script, stdout.String(), stderr.String())
	}
	if s := stderr.String(); strings.TrimSpace(s) != "" {
		t.Logf("node %s stderr:\n%s", script, s)
	}
	return stdout.Bytes()
}
