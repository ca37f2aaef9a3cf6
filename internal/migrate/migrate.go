// Package migrate holds what the Postgres and ClickHouse migrators share: reading the
// numbered files a build carries and comparing them with a store's ledger.
package migrate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// File is one migration a build carries.
type File struct {
	Name   string // e.g. 001_init.sql
	Number int
	SQL    string
	SHA256 string
}

// Applied is one ledger row.
type Applied struct {
	Name   string
	SHA256 string
}

var fileName = regexp.MustCompile(`^([0-9]{3,})_[a-z0-9_]+\.sql$`)

// Load reads every NNN_name.sql file of fsys in number order. Two files with one
// number, or a .sql file not named that way, is a build error.
func Load(fsys fs.FS) ([]File, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var files []File
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration %s: name must be NNN_lower_snake.sql", e.Name())
		}
		n, _ := strconv.Atoi(m[1])
		if other, dup := seen[n]; dup {
			return nil, fmt.Errorf("migrations %s and %s share number %d", other, e.Name(), n)
		}
		seen[n] = e.Name()
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(b)
		files = append(files, File{Name: e.Name(), Number: n, SQL: string(b), SHA256: hex.EncodeToString(sum[:])})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Number < files[j].Number })
	return files, nil
}

// Plan compares the build's files with the ledger. It refuses an applied file whose
// content changed, and a ledger row for a file this build lacks below its last number;
// a ledger row above it is a newer build's, served with a warning (Newer).
type Plan struct {
	Pending []File
	Newer   []string
}

// PendingNames lists the pending files' names.
func (p Plan) PendingNames() []string {
	names := make([]string, 0, len(p.Pending))
	for _, f := range p.Pending {
		names = append(names, f.Name)
	}
	return names
}

// Compare returns the plan, or an error that must refuse the boot.
func Compare(files []File, ledger []Applied) (Plan, error) {
	byName := map[string]File{}
	last := 0
	for _, f := range files {
		byName[f.Name] = f
		last = f.Number
	}
	applied := map[string]bool{}
	var plan Plan
	for _, a := range ledger {
		applied[a.Name] = true
		f, ok := byName[a.Name]
		if !ok {
			n := 0
			if m := fileName.FindStringSubmatch(a.Name); m != nil {
				n, _ = strconv.Atoi(m[1])
			}
			if n > last {
				plan.Newer = append(plan.Newer, a.Name)
				continue
			}
			return Plan{}, fmt.Errorf("migration %s is applied but this build does not carry it: refusing to start", a.Name)
		}
		if f.SHA256 != a.SHA256 {
			return Plan{}, fmt.Errorf("migration %s changed after it was applied (ledger sha256 %s, file %s): applied migrations are never edited; add a new one", a.Name, a.SHA256, f.SHA256)
		}
	}
	for _, f := range files {
		if !applied[f.Name] {
			plan.Pending = append(plan.Pending, f)
		}
	}
	return plan, nil
}
