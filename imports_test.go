// Tests of the repository as a whole: the import rules of the package map
// (docs/architecture.md) and the README's paths.
package loom_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/loomplane/loom"

// boundary is one import rule of docs/architecture.md: no package under from depends,
// directly or through others, on a package under any of banned; or, with only, on any
// package of the module outside only.
type boundary struct {
	from     string
	banned   []string
	only     []string
	why      string
	optional bool // from may not exist yet
}

var boundaries = []boundary{
	{from: "command", banned: []string{"query", "workers"}, why: "the write side and the read side never import each other, and the write side knows nothing of the workers that write through it"},
	{from: "query", banned: []string{"command", "workers"}, why: "the write side and the read side never import each other, and the read side knows nothing of the workers"},
	{from: "command", banned: []string{"knowledge"}, why: "memory's write side reaches the knowledge plane only through an interface it defines"},
	{from: "query", banned: []string{"knowledge"}, why: "memory's read side reaches the knowledge plane only through an interface it defines"},
	{from: "knowledge/command", banned: []string{"knowledge/query", "knowledge/index", "command", "query", "workers", "projector", "relay"},
		why: "the knowledge plane's write side imports no read side (its own or memory's) and no other role; it shares the plumbing (internal/outbox, internal/generations) and the plane's table owner (knowledge/store)"},
	{from: "knowledge/query", banned: []string{"knowledge/command", "command", "query", "workers", "projector", "relay"},
		why: "the knowledge plane's read side imports no write side (its own or memory's) and no other role"},
	{from: "knowledge/store", only: []string{"knowledge/store", "events", "internal/rowseal"}, why: "the knowledge tables' owner holds statements only (and seals their text at rest as memory rows are, internal/rowseal): every role of the plane, the projector and the index follower import it"},
	{from: "workers", banned: []string{"query", "projector", "relay"}, why: "the workers write through the write side's worker API (command/workerapi.go) and read no read model of the query side"},
	{from: "command/extraction", only: []string{"command/extraction", "internal", "events"}, why: "the extraction pipeline imports no role: the write side hands it the writer of its facts, and both the write side and the workers run it"},
	{from: "knowledge/parse", only: []string{"knowledge/parse"}, why: "the document parser is pure code the knowledge plane calls: it imports no role, no store, nothing of Loom's"},
	{from: "knowledge/dataset", only: []string{"knowledge/dataset", "knowledge/parse"}, why: "the dataset grammar is pure code over parse's tables: it imports no role, no store, nothing else of Loom's"},
	{from: "projector", banned: []string{"command", "query", "workers", "relay"}, why: "the projector builds the read models from the topic alone"},
	{from: "relay", banned: []string{"command", "query", "projector", "workers"}, why: "the relay publishes the outbox's rows as they are: it knows no other role"},
	{from: "internal", banned: []string{"command", "query", "projector", "relay", "workers", "adapters", "console", "cmd", "knowledge"}, why: "internal/ is plumbing that knows no role; cmd/ wires the roles"},
	{from: "events", only: []string{"events"}, why: "events is the public topic contract: downstream modules import it, so it imports nothing of Loom's"},
	{from: "client", only: []string{"client", "events"}, why: "client is public: it imports no package of Loom's but the public ones", optional: true},
	{from: "examples", only: []string{"events", "client"}, why: "the examples are downstream programs: they use the public packages only"},
	{from: "console", only: []string{"console"}, why: "the console is static pages over the REST API: it imports nothing of Loom's"},
	{from: "adapters", only: []string{"adapters", "client", "events", "internal/memrow", "internal/jsonbody"},
		why: "the adapters reach Loom only through the public client (cmd/loomd/app hands them one); besides it they read " +
			"input by the REST API's own rules, so they refuse what REST would by their own field names before a call: " +
			"internal/memrow (a key, a name, an identity; pure code) and internal/jsonbody (a body read strictly; pure code over memrow)"},
}

type listed struct {
	ImportPath string
	Deps       []string
	Error      *struct{ Err string }
}

// under reports whether pkg is the module's package dir or one below it.
func under(pkg, dir string) bool {
	p := module + "/" + dir
	return pkg == p || strings.HasPrefix(pkg, p+"/")
}

// modulePackages lists every package of the module with its dependencies (not its
// tests'), as go list sees them.
func modulePackages(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-json=ImportPath,Deps,Error", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list: %v", err)
		}
		if p.Error != nil {
			t.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// The package map's import rules hold for every package of the module, through its
// whole dependency graph: a package that reaches across a boundary by way of another
// one crosses it too.
func TestImportsKeepTheirBoundaries(t *testing.T) {
	pkgs := modulePackages(t)
	for _, b := range boundaries {
		found := false
		for _, p := range pkgs {
			if !under(p.ImportPath, b.from) {
				continue
			}
			found = true
			for _, dep := range p.Deps {
				if !strings.HasPrefix(dep, module+"/") || under(dep, b.from) {
					continue
				}
				crosses := slices.ContainsFunc(b.banned, func(dir string) bool { return under(dep, dir) })
				if b.only != nil {
					crosses = !slices.ContainsFunc(b.only, func(dir string) bool { return under(dep, dir) })
				}
				if crosses {
					t.Errorf("%s depends on %s: %s", strings.TrimPrefix(p.ImportPath, module+"/"), strings.TrimPrefix(dep, module+"/"), b.why)
				}
			}
		}
		if !found && !b.optional {
			t.Errorf("no package under %s/: the rule %q checks nothing (did the package map change? update docs/architecture.md and this test)", b.from, b.why)
		}
	}
}

// cmd/ is the top of the map: it wires the roles, so no package below it (tests
// aside) depends on any of it. bench/ once imported cmd/loomd/app while cmd/loomd
// imported bench/: the one arrow that ran back up.
func TestNothingDependsOnTheWiring(t *testing.T) {
	for _, p := range modulePackages(t) {
		if under(p.ImportPath, "cmd") || under(p.ImportPath, "tests") {
			continue
		}
		for _, dep := range p.Deps {
			if under(dep, "cmd") {
				t.Errorf("%s depends on %s: cmd/ wires the roles, nothing below it may import it", strings.TrimPrefix(p.ImportPath, module+"/"), strings.TrimPrefix(dep, module+"/"))
			}
		}
	}
}
