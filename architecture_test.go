package loom_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The map must name what the code has: a table created by a migration and not dropped
// by a later one, a ClickHouse table, a top-level package. A new one lands with its line
// in docs/architecture.md or this test fails.
func TestArchitectureNamesEveryTableAndPackage(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	named := func(name string) bool {
		inMap := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `/\s`) // a line of the package map
		return strings.Contains(string(doc), "`"+name+"`") || strings.Contains(string(doc), "`"+name+"/`") ||
			strings.Contains(string(doc), "(../"+name+"/)") || inMap.Match(doc)
	}
	var missing []string
	for _, table := range tablesIn(t, "schemas/postgres/*.sql") {
		if !named(table) {
			missing = append(missing, "Postgres table "+table)
		}
	}
	for _, table := range tablesIn(t, "schemas/clickhouse/*.sql") {
		if !named(table) {
			missing = append(missing, "ClickHouse table "+table)
		}
	}
	for _, pkg := range topLevelPackages(t) {
		if !named(pkg) {
			missing = append(missing, "package "+pkg+"/")
		}
	}
	if len(missing) > 0 {
		t.Errorf("docs/architecture.md does not name:\n  %s", strings.Join(missing, "\n  "))
	}
}

var (
	createTable = regexp.MustCompile(`(?i)create\s+(?:unlogged\s+)?table\s+(?:if\s+not\s+exists\s+)?loom\.([a-z_0-9]+)`)
	dropTable   = regexp.MustCompile(`(?i)drop\s+table\s+(?:if\s+exists\s+)?loom\.([a-z_0-9]+)`)
)

// tablesIn lists the tables the files matching glob leave standing, in file order.
func tablesIn(t *testing.T, glob string) []string {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no schema files match %s (%v)", glob, err)
	}
	sort.Strings(files)
	standing := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range createTable.FindAllStringSubmatch(string(b), -1) {
			standing[m[1]] = true
		}
		for _, m := range dropTable.FindAllStringSubmatch(string(b), -1) {
			delete(standing, m[1])
		}
	}
	var out []string
	for name := range standing {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// topLevelPackages lists the repository's top-level directories that hold Go code.
func topLevelPackages(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || e.Name() == "node_modules" {
			continue
		}
		if hasGo(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

func hasGo(dir string) bool {
	found := false
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || found {
			return filepath.SkipDir
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			found = true
		}
		return nil
	})
	return found
}
