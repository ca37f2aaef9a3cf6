package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) Lookup { return func(k string) string { return m[k] } }

func TestDefaultsRunAndServeNeedsTheStores(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if c.HTTP.Addr != ":8080" || c.Pipeline.Topic != "loom.memory.revisions.v1" || c.Query.ProjectionWait != 5*time.Second || !c.Roles.Has(RoleRelay) {
		t.Fatalf("defaults: %+v", c)
	}
	err = c.RequireStores()
	for _, v := range []string{"LOOM_PG_DSN", "LOOM_CH_ADDR", "LOOM_KAFKA_BROKERS", "LOOM_KEK"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Fatalf("serve without stores: %v, want it to name %s", err, v)
		}
	}
	c, err = Load(env(map[string]string{"LOOM_PG_DSN": "postgres://x", "LOOM_CH_ADDR": "a:9000, b:9000", "LOOM_KAFKA_BROKERS": "k:9092",
		"LOOM_KEK": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}))
	if err != nil || c.RequireStores() != nil || len(c.ClickHouse.Addr) != 2 || c.ClickHouse.Addr[1] != "b:9000" {
		t.Fatalf("stores: %+v %v", c, err)
	}
}

func TestMalformedSettingsAreNamed(t *testing.T) {
	for name, val := range map[string]string{
		"LOOM_PG_PROJECTION_WAIT_MS": "soon",
		"LOOM_BOOT_MIGRATE":          "perhaps",
		"LOOM_ROLES":                 "api,cron",
		"LOOM_PG_DURABILITY":         "async",
		"LOOM_KEK":                   "c2hvcnQ=",
		"LOOM_EMBEDDER":              "magic",
		"LOOM_SEARCH_TOP_K_MAX":      "0",
		"LOOM_PROJECTION":            "has/slash",
		// Each role reads its section as it is, so a value a role cannot run with is
		// refused here rather than replaced by a default of the role's own.
		"LOOM_SHUTDOWN_GRACE_MS":               "0",
		"LOOM_OUTBOX_POLL_MS":                  "0",
		"LOOM_OUTBOX_BATCH_ROWS":               "-1",
		"LOOM_PG_ADMISSION_ROUNDS":             "0",
		"LOOM_BULK_CONFLICT_CHECK_MAX_ENTRIES": "0",
		"LOOM_PG_REQUEST_LEASE_SECONDS":        "0",
		"LOOM_ERASURE_LEASE_S":                 "0",
		"LOOM_ERASURE_RECOVERY_INTERVAL_MS":    "-1",
		"LOOM_PROJECTOR_BATCH_ATTEMPTS":        "0",
		"LOOM_PG_POOL_MAX_SIZE":                "0",
	} {
		_, err := Load(env(map[string]string{name: val}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s=%s: %v, want an error naming the variable", name, val, err)
		}
	}
}

func TestRolesParseWithTheAPIAlias(t *testing.T) {
	for list, want := range map[string]string{
		"api":                           "command,query",
		"relay, projector":              "relay,projector",
		"projector,api,command":         "command,query,projector",
		"command,query,relay,projector": "command,query,relay,projector",
	} {
		got, err := ParseRoles(list)
		if err != nil || got.String() != want {
			t.Errorf("ParseRoles(%q) = %v, %v; want %s", list, got, err, want)
		}
	}
	for _, bad := range []string{"", "api,cron", " , "} {
		if _, err := ParseRoles(bad); err == nil {
			t.Errorf("ParseRoles(%q) accepted", bad)
		}
	}
	c, err := Load(env(nil))
	if err != nil || c.Roles.String() != "command,query,relay,projector,workers" {
		t.Fatalf("default roles: %v %v", c.Roles, err)
	}
	if c.PG.Durability != DurabilitySynchronous {
		t.Fatalf("durability defaults to %q, want synchronous", c.PG.Durability)
	}
}

var (
	configRow  = regexp.MustCompile("^\\| `((?:LOOM|OTEL)_[A-Z0-9_]+)` \\| ([^|]*) \\| [^|]+ \\|$")
	loomString = regexp.MustCompile(`"(LOOM_[A-Z0-9_]+)"`)
)

// deploy/CONFIG.md is the operator's reference: one row per variable with its default.
// It is checked against what Load reads, and its development section against the
// variables the rest of the module reads, so neither can drift from the code.
func TestConfigReferenceMatchesTheCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "CONFIG.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	devDocumented := map[string]bool{}
	inDev := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			inDev = strings.Contains(line, "Development")
		}
		if !strings.HasPrefix(line, "| `LOOM_") && !strings.HasPrefix(line, "| `OTEL_") {
			continue
		}
		m := configRow.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("CONFIG.md:%d: not a `| `NAME` | default | meaning |` row: %s", i+1, line)
			continue
		}
		if inDev {
			devDocumented[m[1]] = true
			continue
		}
		if _, dup := documented[m[1]]; dup {
			t.Errorf("CONFIG.md documents %s twice", m[1])
		}
		documented[m[1]] = strings.TrimSpace(m[2])
	}
	read := map[string]bool{}
	for _, s := range Settings() {
		read[s.Name] = true
		want := "—"
		if s.Default != "" {
			want = "`" + s.Default + "`"
		}
		got, ok := documented[s.Name]
		switch {
		case !ok:
			t.Errorf("config reads %s; add it to deploy/CONFIG.md as: | `%s` | %s | ... |", s.Name, s.Name, want)
		case got != want:
			t.Errorf("CONFIG.md gives %s the default %s; the code's default is %s", s.Name, got, want)
		}
	}
	for name := range documented {
		if !read[name] {
			t.Errorf("CONFIG.md documents %s, which the config does not read", name)
		}
	}
	src, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range loomString.FindAllStringSubmatch(string(src), -1) {
		if !read[m[1]] {
			t.Errorf("config.go names %s but Load does not read it through the reader", m[1])
		}
	}

	// Every other LOOM_* variable the module reads belongs to the development section.
	elsewhere := map[string]bool{}
	root := filepath.Join("..", "..")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".loom" || p == filepath.Join(root, "internal", "config")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range loomString.FindAllStringSubmatch(string(b), -1) {
			if !read[m[1]] {
				elsewhere[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range elsewhere {
		if !devDocumented[name] {
			t.Errorf("the module reads %s outside internal/config; document it under Development and test only", name)
		}
	}
	for name := range devDocumented {
		if !elsewhere[name] {
			t.Errorf("CONFIG.md's development section documents %s, which no code reads", name)
		}
	}
}
