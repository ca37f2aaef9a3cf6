package loom_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	pathLike = regexp.MustCompile(`^[A-Za-z0-9_.*-]+(/[A-Za-z0-9_.*-]*)+$`)
	// layoutWord is a name in the Layout block: a directory (a trailing slash) or a
	// file with an extension; NNN stands for a migration's number.
	layoutWord = regexp.MustCompile(`^[A-Za-z0-9_.*-]+(/[A-Za-z0-9_.*-]+)*(/|\.(go|sql|json|yaml|yml|md|sh|xml|conf))$`)
)

// exists reports whether a repository path (a glob; NNN is three digits) names
// something in the checkout.
func exists(t *testing.T, path string) bool {
	t.Helper()
	pattern := strings.ReplaceAll(strings.TrimSuffix(path, "/"), "NNN", "[0-9][0-9][0-9]")
	matches, err := filepath.Glob(filepath.FromSlash(pattern))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return len(matches) > 0
}

// Every repository path the README names exists: its links, the paths in its inline
// code, and the files and directories of its Layout section, each relative to the
// directory its row describes. Runtime paths (.loom/, bin/) are not the repository's.
func TestReadmeNamesOnlyPathsThatExist(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]string{} // path → where the README names it
	section, fenced, rowDir := "", false, ""
	for i, line := range strings.Split(string(b), "\n") {
		where := "README.md:" + strconv.Itoa(i+1)
		if strings.HasPrefix(line, "## ") {
			section = line
		}
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced && section == "## Layout" {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			if !strings.HasPrefix(line, " ") {
				named[fields[0]] = where
				rowDir = ""
				if strings.HasSuffix(fields[0], "/") {
					rowDir = fields[0]
				}
				fields = fields[1:]
			}
			for _, f := range fields {
				f = strings.Trim(f, "`(),;:")
				if !layoutWord.MatchString(f) {
					continue
				}
				if p := rowDir + f; exists(t, p) || !strings.Contains(strings.TrimSuffix(f, "/"), "/") {
					named[p] = where
				} else {
					named[f] = where // a path from the root, written in another directory's row
				}
			}
			continue
		}
		if fenced {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target != "" && !strings.Contains(target, "://") && !strings.HasPrefix(target, "mailto:") {
				named[target] = where
			}
		}
		spans := strings.Split(line, "`")
		for j := 1; j < len(spans); j += 2 {
			s := spans[j]
			if pathLike.MatchString(s) && !strings.HasPrefix(s, ".loom/") && !strings.HasPrefix(s, "bin/") {
				named[s] = where
			}
		}
	}
	for path, where := range named {
		if !exists(t, path) {
			t.Errorf("%s names %s, which is not in the repository", where, path)
		}
	}
	for _, want := range []string{"cmd/loomd/app/", "docs/architecture.md", "internal/config/"} {
		if _, ok := named[want]; !ok {
			t.Errorf("the README's Layout no longer names %s: the check may have lost track of its format", want)
		}
	}
}
