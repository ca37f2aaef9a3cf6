package workers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/tests/testenv"
)

// The conflict resolver's decision leaves an audit row of its own (memory-architecture,
// "Acting": a hash-only memory.conflict_resolver row of the pairs, actions, verdicts and
// confidences): actor worker:conflict-resolver, at its retirement's seq, chained with
// the namespace's other rows, so the chain verifies with it and a change to it fails
// the verification there.
func TestAResolverDecisionLeavesAChainedAuditRow(t *testing.T) {
	ctx := context.Background()
	const org = "judge-audit"
	w := startWorkers(t, org, []string{resolverWorker}, nil)
	newMoveJudge(w.srv)
	pool, conn := env.PG(t), env.CH(t)
	alice := client.Identity{UserID: "alice"}
	ns := testenv.Unique(t, "resolver-audit")
	w.c.Configure(t, ns, map[string]any{"conflict_policy": "auto_reinforce"})
	set(t, w.tc, ns, "home", "alice's home city is Lisbon", alice)
	set(t, w.tc, ns, "drink", "alice drinks green tea every morning", alice)
	set(t, w.tc, ns, "residence", "alice's home city is Berlin", alice)
	drained(t, pool, resolverWorker, org)
	old, upd := get(t, w.tc, ns, "home", alice), get(t, w.tc, ns, "residence", alice)
	if old.Status != "superseded" || old.SupersededBy != upd.MemoryID {
		t.Fatalf("the resolver did not retire the older row: %+v", old)
	}
	testenv.WaitProjected(t, pool, "main", org, ns)

	var decisions []auditchain.Row
	if err := auditchain.EachRow(ctx, conn, auditchain.Namespace{Org: org, Namespace: ns}, 0, 0, func(r auditchain.Row) error {
		if r.Op == "memory.conflict_resolver" {
			decisions = append(decisions, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(decisions) != 1 {
		t.Fatalf("%d decision rows; want the retirement's one", len(decisions))
	}
	d := decisions[0]
	if d.Actor != "worker:conflict-resolver" || d.EventType != "audit.decision" || d.Status != "retire" || d.Seq != uint64(old.Seq) {
		t.Fatalf("the decision row: %+v; want worker:conflict-resolver's retire at the retirement's seq %d", d, old.Seq)
	}
	var detail struct {
		Members []string `json:"members"`
		Pairs   []struct {
			MemoryID   string  `json:"memory_id"`
			PeerID     string  `json:"peer_id"`
			Action     string  `json:"action"`
			Verdict    string  `json:"verdict"`
			Confidence float64 `json:"confidence"`
		} `json:"pairs"`
	}
	if err := json.Unmarshal([]byte(d.Detail), &detail); err != nil {
		t.Fatal(err)
	}
	if len(detail.Pairs) != 1 || detail.Pairs[0].MemoryID != upd.MemoryID || detail.Pairs[0].PeerID != old.MemoryID ||
		detail.Pairs[0].Action != "retire" || detail.Pairs[0].Verdict != "update" || detail.Pairs[0].Confidence != 0.99 ||
		!strings.Contains(strings.Join(detail.Members, ","), old.MemoryID) || strings.Contains(d.Detail, "Lisbon") {
		t.Fatalf("the decision's account: %s; want %s retiring %s on an update at 0.99, no text", d.Detail, upd.MemoryID, old.MemoryID)
	}

	if _, err := auditchain.Verify(ctx, conn, pool, org, ns); err != nil {
		t.Fatalf("the chain with a decision row: %v", err)
	}
	if _, err := conn.Mutate(ctx, ch.Mutation{Table: "audit_log", Set: "detail = replaceOne(detail, '\"retire\"', '\"clear\"')",
		Where: "org = ? AND namespace = ? AND seq = ? AND op = 'memory.conflict_resolver'", Args: []any{org, ns, d.Seq}}); err != nil {
		t.Fatal(err)
	}
	_, err := auditchain.Verify(ctx, conn, pool, org, ns)
	if brk, ok := err.(*auditchain.Break); !ok || brk.Seq != d.Seq {
		t.Fatalf("a decision row changed: %v, want the chain broken at seq %d", err, d.Seq)
	}
}
