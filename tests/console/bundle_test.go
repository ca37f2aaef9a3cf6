package console

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

// The console's script (console/static/app.js) is a bundle that `make console` builds
// from console/src and the TypeScript client's src, and it is committed so that `go build`
// needs no node. This test builds it anew, as `make console` does, from the sources as they
// stand and with the esbuild and openapi-fetch that console/package-lock.json pins, and
// fails when the committed bundle differs: an edit of either source without `make console`
// cannot reach a binary.
func TestConsoleBundleIsCurrent(t *testing.T) {
	const repo = "../.."
	modules := testenv.NodeModules(t, "console-bundle", filepath.Join(repo, "console"))

	// A copy laid out as the repository is (the console imports ../../clients/typescript/src).
	root := t.TempDir()
	copyTree(t, filepath.Join(repo, "console"), filepath.Join(root, "console"), "build.mjs", "package.json", "src/*")
	copyTree(t, filepath.Join(repo, "clients", "typescript"), filepath.Join(root, "clients", "typescript"), "src/*.ts")
	if err := os.Symlink(modules, filepath.Join(root, "console", "node_modules")); err != nil {
		t.Fatal(err)
	}
	built := filepath.Join(root, "app.js")
	cmd := exec.Command("node", "build.mjs", "--outfile", built)
	cmd.Dir = filepath.Join(root, "console")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node build.mjs: %v\n%s", err, out)
	}
	want, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(repo, "console", "static", "app.js"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("console/static/app.js is not the bundle of console/src and clients/typescript/src as they stand "+
			"(%d bytes committed, %d built): run `make console` and commit console/static/app.js", len(got), len(want))
	}
}

// copyTree copies the files of from that match the patterns (relative to from; a
// generated *.gen.ts is left out) to the same places under to.
func copyTree(t *testing.T, from, to string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		files, err := filepath.Glob(filepath.Join(from, p))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s matches no file in %s", p, from)
		}
		for _, f := range files {
			if strings.HasSuffix(f, ".gen.ts") {
				continue
			}
			rel, _ := filepath.Rel(from, f)
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(to, rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
