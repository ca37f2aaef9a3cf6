package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// NodeModules installs the npm packages that the package.json and package-lock.json of
// src pin (its .npmrc too, when it has one) into a cache folder outside the tree, keyed by
// name and the lock (a change of versions installs afresh; an unchanged lock installs
// once per machine), and returns that folder's node_modules. Install scripts do not run:
// the packages are what the lock names and nothing they fetch. Without npm it installs
// node (scripts/install-deps.sh); an install that fails fails the test.
func NodeModules(t testing.TB, name, src string) string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		_, here, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(here), "..", "..", "scripts", "install-deps.sh")
		if out, err := exec.Command(script).CombinedOutput(); err != nil {
			t.Fatalf("node and npm are missing and scripts/install-deps.sh could not install them: %v\n%s", err, out)
		}
	}
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "loom", name+"-"+hex.EncodeToString(sum[:6]))
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, ".installed")); err == nil {
		return modules
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"package.json", "package-lock.json", ".npmrc"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if os.IsNotExist(err) && f == ".npmrc" {
			continue
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(tmp, f), b, 0o644)
		}
		if err != nil {
			os.RemoveAll(tmp)
			t.Fatal(err)
		}
	}
	install := exec.Command("npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	install.Dir = tmp
	if out, err := install.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		t.Fatalf("npm ci of %s failed: %v\n%s", src, err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, "node_modules", ".installed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	return modules
}
