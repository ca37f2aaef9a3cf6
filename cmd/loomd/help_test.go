package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Every subcommand's --help (and -h) prints its usage line and its flags on stdout and
// exits 0, whatever LOOM_* says: nothing is started.
func TestEveryCommandsHelpPrintsItsUsageAndFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "loomd")
	// Through the go command's cache of linked programs (as testenv.GoBuild): the suite's
	// other packages that run loomd link it once between them.
	if out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "run", "-exec", "cp", ".", bin).CombinedOutput(); err != nil {
		t.Fatalf("build loomd: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args  string
		flags []string // each flag the command takes
	}{
		{"dev", []string{"dir", "addr", "kafka-port"}},
		{"serve", []string{"roles", "addr"}},
		{"migrate", nil},
		{"token create", []string{"org", "operator", "role", "name", "namespace", "read-user", "expires-in"}},
		{"token list", []string{"org"}},
		{"token revoke", nil},
		{"token rotate", []string{"expires-in"}},
		{"namespace snapshot", []string{"org", "namespace", "out", "gzip"}},
		{"namespace restore", []string{"org", "namespace", "in"}},
		{"namespace", nil},
		{"export", []string{"org", "user-id", "out", "gzip"}},
		{"token", nil},
		{"projector reset", []string{"group", "topic", "to", "execute"}},
		{"projector rebuild", []string{"projection", "drop-old", "abandon", "drop-retired", "status"}},
		{"projector", nil},
		{"republish", []string{"from-seq", "namespace", "org", "topic"}},
		{"audit verify", []string{"org", "namespace"}},
		{"refs rotate", []string{"org"}},
		{"refs", nil},
		{"knowledge ingest", []string{"url", "token-file", "namespace", "prefix", "tags", "user", "no-wait"}},
		{"bench", []string{"scenario", "duration", "concurrency", "out", "search-sizes", "get-rows", "bulk-entries", "replay-revisions", "dir"}},
	} {
		for _, help := range []string{"--help", "-h"} {
			cmd := exec.Command(bin, append(strings.Fields(c.args), help)...)
			cmd.Env = []string{"LOOM_PG_DSN=postgres://nowhere.invalid/loom"}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Errorf("loomd %s %s: %v\nstderr: %s", c.args, help, err, stderr.String())
				continue
			}
			out := stdout.String()
			if !strings.HasPrefix(out, "Usage:\n  loomd "+c.args) {
				t.Errorf("loomd %s %s does not start with its usage line:\n%s", c.args, help, out)
			}
			for _, f := range c.flags {
				if !strings.Contains(out, "\n  -"+f+" ") && !strings.Contains(out, "\n  -"+f+"\n") {
					t.Errorf("loomd %s %s does not list -%s:\n%s", c.args, help, f, out)
				}
			}
			if strings.Contains(out+stderr.String(), "help requested") {
				t.Errorf("loomd %s %s still says only that help was requested", c.args, help)
			}
		}
	}
	// A command group lists each of its commands.
	out, _ := exec.Command(bin, "projector", "--help").Output()
	for _, sub := range []string{"loomd projector reset", "loomd projector rebuild"} {
		if !strings.Contains(string(out), sub) {
			t.Errorf("loomd projector --help does not list %q:\n%s", sub, out)
		}
	}
}
