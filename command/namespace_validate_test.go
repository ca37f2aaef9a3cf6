package command

import (
	"regexp"
	"testing"

	"github.com/loomplane/loom/internal/memrow"
)

// headFindings names what the policy as it stands now says of one live head.
func TestHeadFindings(t *testing.T) {
	pol := &policy{blacklist: []blacklistEntry{{pattern: `\d{4}-\d{4}`, re: regexp.MustCompile(`\d{4}-\d{4}`)}}}
	cfg := NamespaceConfig{Types: map[string]TypeConfig{"note": {CharLimit: 5}, "old": {Retype: "fact"}}}
	row := func(mut func(r *memrow.Row)) *memrow.Row {
		r := &memrow.Row{Identity: memrow.Identity{MemoryKey: "k"}, MemoryType: "fact", Status: memrow.StatusActive, Value: []byte(`"a plain fact"`)}
		mut(r)
		return r
	}
	for _, c := range []struct {
		name string
		row  *memrow.Row
		want []string
	}{
		{"clean", row(func(*memrow.Row) {}), nil},
		{"blacklisted", row(func(r *memrow.Row) { r.Value = []byte(`"card 1234-5678"`) }), []string{findingBlacklisted}},
		{"redacted is not matched", row(func(r *memrow.Row) { r.Value, r.Redacted = []byte(`"card 1234-5678"`), true }), nil},
		{"over the char limit", row(func(r *memrow.Row) { r.MemoryType = "note" }), []string{findingOverCharLimit}},
		{"retyped", row(func(r *memrow.Row) { r.MemoryType = "old" }), []string{findingRetypePending}},
		{"conflicted", row(func(r *memrow.Row) { r.Status = memrow.StatusConflicted }), []string{findingUnresolvedConflict}},
		{"owed", row(func(r *memrow.Row) { r.JudgementOwed = true }), []string{findingJudgementOwed}},
		{"tombstone", row(func(r *memrow.Row) { r.Tombstone, r.Value = true, []byte(`"card 1234-5678"`) }), nil},
	} {
		var got []string
		for _, f := range headFindings(c.row, cfg, pol) {
			got = append(got, f.Code)
			if f.MemoryKey != "k" {
				t.Errorf("%s: finding %s cites key %q", c.name, f.Code, f.MemoryKey)
			}
		}
		if len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
			t.Errorf("%s: findings %v, want %v", c.name, got, c.want)
		}
	}
}
