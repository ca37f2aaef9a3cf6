package testenv

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Build compiles the command package pkg (an import path) into the test's temporary
// directory and returns the binary: a test that runs a program runs what users run.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), path.Base(pkg))
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(goTool, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
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
