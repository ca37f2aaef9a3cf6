package testenv

import (
	"context"
	"flag"
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
	b := buildOf(pkg)
	b.once.Do(func() { b.bin, b.err = buildInto(pkg) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// prebuild starts building the command packages in the background (Options.Prebuild)
// when the whole package runs (no -test.run): the link (about 13 s of CPU for loomd)
// then runs while the stores start and the first tests wait on them, not in the test
// that first runs the program. removeBuilds stops a build still running.
func prebuild(pkgs []string) {
	if len(pkgs) == 0 {
		return
	}
	if !flag.Parsed() {
		flag.Parse() // m.Run would parse them; TestMain runs before it
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		return
	}
	builds.running.Add(1)
	go func() {
		defer builds.running.Done()
		for _, pkg := range pkgs {
			b := buildOf(pkg)
			b.once.Do(func() { b.bin, b.err = buildInto(pkg) })
		}
	}()
}

func buildOf(pkg string) *build {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	b := builds.byPkg[pkg]
	if b == nil {
		b = &build{}
		builds.byPkg[pkg] = b
	}
	return b
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
	// ctx ends the builds still running when the tests end; running counts prebuild's.
	ctx     context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup
}{byPkg: map[string]*build{}}

func init() { builds.ctx, builds.cancel = context.WithCancel(context.Background()) }

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
	if err := GoBuild(builds.ctx, pkg, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// GoBuild builds the command package pkg into out through the go command's cache of
// linked programs: `go run -exec cp pkg out` links pkg (as `go build` does, without
// its debug information) only when the cache has no link of these sources, and copies
// the program to out. The suite's packages that run loomd (e2e, faults, cluster) each
// linked it again with `go build -o`, about 13 s of CPU each; now the first links it.
func GoBuild(ctx context.Context, pkg, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if b, err := exec.CommandContext(ctx, goTool, "run", "-exec", "cp", pkg, out).CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// removeBuilds deletes the binaries Build made.
func removeBuilds() {
	builds.cancel()
	builds.running.Wait()
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
