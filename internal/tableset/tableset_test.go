package tableset

import "testing"

func TestNamesOfASetParseBack(t *testing.T) {
	for _, s := range []Set{Serving(), Of(1), Of(12)} {
		for _, table := range Projection() {
			got, gs, ok := Parse(s.Name(table))
			if !ok || got != table || gs != s {
				t.Errorf("Parse(%q) = %q, %v, %t; want %q, %v", s.Name(table), got, gs, ok, table, s)
			}
		}
	}
	if Of(3).Qualified("memory") != "loom.memory__g3" || Serving().Qualified("audit_log") != "loom.audit_log" {
		t.Fatalf("qualified names: %s, %s", Of(3).Qualified("memory"), Serving().Qualified("audit_log"))
	}
	for _, name := range []string{"ch_migrations", "storage_authority", "memory__g0", "memory__g", "memory__gx", "other__g2", "memory_g2"} {
		if _, _, ok := Parse(name); ok {
			t.Errorf("Parse(%q) took it for a projection table", name)
		}
	}
}
