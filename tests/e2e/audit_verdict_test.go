package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/tests/testenv"
)

// A write's own audit row names what its admission judged it (memory-architecture,
// "Audit rows": identity, actor, key, id, content hash, source class and verdict),
// and the verdict is in the chain: a row whose verdict is edited fails verification.
func TestAWritesAuditRowNamesItsVerdict(t *testing.T) {
	ctx := context.Background()
	_, c, org := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "verdicts")
	want := map[string]string{}
	for _, w := range []struct{ key, value string }{
		{"k1", "the user prefers dark mode in the editor"},
		{"k2", "the user prefers the dark mode in the editor"},
	} {
		r, err := tc.Set(ctx, ns, w.key, client.SetRequest{Value: w.value})
		if err != nil {
			t.Fatal(err)
		}
		want[w.key] = r.Verdict
	}
	if want["k1"] != "new" || want["k2"] != "duplicate" {
		t.Fatalf("verdicts %v; want k1 new and k2 duplicate (the test's premise)", want)
	}
	pool := env.PG(t)
	testenv.WaitProjected(t, pool, "main", org, ns)
	page, err := tc.NamespaceAudit(ctx, ns, client.AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, row := range page.Rows {
		if row.Op != "memory.set" || len(row.Detail) == 0 {
			continue
		}
		var d struct {
			Verdict string `json:"verdict"`
		}
		if err := json.Unmarshal(row.Detail, &d); err != nil {
			t.Fatalf("row %d's detail %s: %v", row.Seq, row.Detail, err)
		}
		got[row.MemoryKey] = d.Verdict
	}
	if got["k1"] != "new" || got["k2"] != "duplicate" {
		t.Fatalf("the audit rows' verdicts %v; want %v", got, want)
	}

	conn := env.CH(t)
	if _, err := auditchain.Verify(ctx, conn, pool, org, ns); err != nil {
		t.Fatalf("the chain before the edit: %v", err)
	}
	var seq uint64
	for _, row := range page.Rows {
		if row.Op == "memory.set" && row.MemoryKey == "k2" {
			seq = row.Seq
		}
	}
	if _, err := conn.Mutate(ctx, ch.Mutation{Table: "audit_log", Set: `detail = '{"verdict":"new"}'`,
		Where: "org = ? AND namespace = ? AND seq = ?", Args: []any{org, ns, seq}}); err != nil {
		t.Fatal(err)
	}
	_, err = auditchain.Verify(ctx, conn, pool, org, ns)
	if brk, ok := err.(*auditchain.Break); !ok || brk.Seq != seq {
		t.Fatalf("a verdict edited in ClickHouse: %v, want the chain broken at seq %d", err, seq)
	}
}
