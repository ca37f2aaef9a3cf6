package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Build compiles the command package pkg (an import path) and returns the binary: a
// test that runs a program runs what users run. Each package is built once per test
// binary and shared by its tests: a build links the whole program again (about 13 s of
// CPU for loomd with the build cache warm), and seven of the e2e tests run loomd.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	builds.mu.Lock()
	b := builds.byPkg[pkg]
	if b == nil {
		b = &build{}
		builds.byPkg[pkg] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() { b.bin, b.err = buildInto(pkg) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// build is one package's binary, built at its first use.
type build struct {
	once sync.Once
	bin  string
	err  error
}

var builds = struct {
	mu    sync.Mutex
	dir   string // removed when the test binary's tests end (Run)
	byPkg map[string]*build
}{byPkg: map[string]*build{}}

func buildInto(pkg string) (string, error) {
	builds.mu.Lock()
	if builds.dir == "" {
		d, err := os.MkdirTemp("", "loom-test-bin-")
		if err != nil {
			builds.mu.Unlock()
			return "", fmt.Errorf("build %s: %w", pkg, err)
		}
		builds.dir = d
	}
	dir := builds.dir
	builds.mu.Unlock()
	bin := filepath.Join(dir, strings.ReplaceAll(pkg, "/", "_"), path.Base(pkg))
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(goTool, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// removeBuilds deletes the binaries Build made.
func removeBuilds() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
}

// LoomdEnv is the environment of a loomd subprocess on the test stores, already
// migrated, with extra LOOM_* settings appended.
func (e *Env) LoomdEnv(extra ...string) []string {
	return append(append(os.Environ(),
		"LOOM_PG_DSN="+e.Stack.Postgres.DSN(),
		"LOOM_CH_ADDR="+e.Stack.ClickHouse.Addr(),
		"LOOM_KAFKA_BROKERS="+strings.Join(e.Stack.Kafka.Brokers(), ","),
		"LOOM_BOOT_MIGRATE=false",
		"LOOM_KEK="+e.base.Keys.KEK,
		// The test stores are one Postgres without a standby.
		"LOOM_PG_DURABILITY=local",
	), extra...)
}
