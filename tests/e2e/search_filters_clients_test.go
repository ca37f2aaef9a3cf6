package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// provenanceScope writes writeProvenanceRows' rows into a fresh append_only namespace
// and answers the API's URL, a token of its org, and the namespace.
func provenanceScope(t *testing.T, prefix string) (url, token, ns string) {
	t.Helper()
	n, url := env.API(t, func(c *config.Config) { c.Command.ConflictThreshold, c.Command.DuplicateThreshold = 0.5, 0.8 })
	token = env.Token(t, n, auth.NewToken{Org: "acme"})
	c := testenv.NewClient(url, token)
	ns = testenv.Unique(t, prefix)
	c.Configure(t, ns, map[string]any{"conflict_policy": "append_only"})
	writeProvenanceRows(t, c, ns)
	return url, token, ns
}

// filteredRun is what js/mcp_filters.mjs and js/mem0_filters.mjs printed: per call, the
// keys it served or its error.
type filteredRun map[string]struct {
	Keys  []string
	Error json.RawMessage
}

// runFiltered runs a script of js/ against the API's path with provenanceScope's rows.
func runFiltered(t *testing.T, prefix, script, path string) filteredRun {
	t.Helper()
	url, token, ns := provenanceScope(t, prefix)
	var run filteredRun
	if err := json.Unmarshal(runNode(t, script, nil, url+path, token, ns, provenanceQuery), &run); err != nil {
		t.Fatal(err)
	}
	return run
}

func (run filteredRun) check(t *testing.T, want map[string][]string) {
	t.Helper()
	for name, keys := range want {
		got, ok := run[name]
		if !ok || got.Error != nil || !slices.Equal(got.Keys, keys) {
			t.Errorf("%s: served %v (error %s), want %v", name, got.Keys, got.Error, keys)
		}
	}
}

func (run filteredRun) refused(t *testing.T, name string, words ...string) {
	t.Helper()
	got := run[name]
	for _, w := range words {
		if got.Error == nil || !strings.Contains(string(got.Error), w) {
			t.Errorf("%s: %s (served %v), want an error naming %q", name, got.Error, got.Keys, w)
		}
	}
}

// The MCP memory_search tool takes memory.search's provenance filters: the official
// TypeScript SDK's calls narrow to rows naming entities, of a source class, or
// verified, and a source class no row holds is a tool error naming the field.
func TestMCPSearchFiltersOnProvenance(t *testing.T) {
	run := runFiltered(t, "pf-mcp", "mcp_filters.mjs", "/mcp")
	run.check(t, map[string][]string{
		"all":          {"survey.checked", "survey.direct", "survey.imported"},
		"bothEntities": {"survey.imported"},
		"imported":     {"survey.imported"},
		"verified":     {"survey.checked"},
		"notVerified":  {"survey.direct", "survey.imported"},
	})
	run.refused(t, "badClass", "VALIDATION_FAILED", "source_class")
}

// mem0's own MemoryClient filters a search and a getAll by Loom's provenance filters
// written in mem0's grammar (AND, OR, in, icontains); an operator they do not take,
// or a value Loom would refuse, is mem0's ValidationError naming the field.
func TestMem0SearchFiltersOnProvenance(t *testing.T) {
	run := runFiltered(t, "pf-mem0", "mem0_filters.mjs", "/mem0")
	run.check(t, map[string][]string{
		"all":                {"survey.checked", "survey.direct", "survey.imported"},
		"bothEntities":       {"survey.imported"},
		"imported":           {"survey.imported"},
		"directOrDerived":    {"survey.checked", "survey.direct"},
		"verified":           {"survey.checked"},
		"verifiedOrImported": {"survey.checked", "survey.imported"},
		"listNotVerified":    {"survey.direct", "survey.imported"},
	})
	run.refused(t, "badOperator", "ValidationError", "verified: operator", "gt", "does not apply")
	run.refused(t, "badClass", "ValidationError", "source_class")
}
