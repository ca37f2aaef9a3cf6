package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/tests/testenv"
)

// A bulk write leaves one audit row of its own (memory-architecture, "memory.bulk_set":
// "One hash-only memory.bulk_set audit row records the write") beside its revisions'
// rows: at its last revision's seq, naming its members and counting its entries'
// verdicts. The row joins the chain: the chain verifies and checkpoints with it, a
// page of namespace.audit never splits its seq, and a change to its account fails the
// verification at its seq.
func TestABulkWriteLeavesOneChainedBatchAuditRow(t *testing.T) {
	ctx := context.Background()
	_, c, org := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "audit-batch")
	pool, conn := env.PG(t), env.CH(t)
	if _, err := tc.Set(ctx, ns, "office", client.SetRequest{Value: "the office is in Leeds"}); err != nil {
		t.Fatal(err)
	}
	ans, err := tc.BulkSet(ctx, ns, client.BulkSetRequest{Entries: []client.BulkEntry{
		{Key: "office", Value: "the office is in Leeds"}, // the stored bytes again: skipped
		{Key: "standup", Value: "the standup is at nine"},
		{Key: "wiki", Value: "the wiki lives on confluence"},
		{Key: "wiki", Value: "the wiki lives on a self-hosted notion"}, // the batch's last of its key wins
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.Written) != 2 {
		t.Fatalf("the batch wrote %+v; want standup and wiki", ans.Written)
	}
	testenv.WaitProjected(t, pool, "main", org, ns)

	var rows []auditchain.Row
	if err := auditchain.EachRow(ctx, conn, auditchain.Namespace{Org: org, Namespace: ns}, 0, 0, func(r auditchain.Row) error {
		rows = append(rows, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d audit rows; want the set's, the batch's two revisions' and the batch's own: %+v", len(rows), rows)
	}
	batch := rows[3]
	if batch.Seq != 3 || rows[2].Seq != 3 || batch.Op != "memory.bulk_set.batch" || batch.EventType != "audit.batch" ||
		batch.Status != "committed" || batch.Actor != rows[1].Actor || batch.PrevHash != rows[2].RowHash {
		t.Fatalf("the batch's own row: %+v (the revision before it %+v)", batch, rows[2])
	}
	var detail struct {
		FirstSeq int64          `json:"first_seq"`
		LastSeq  int64          `json:"last_seq"`
		Members  []string       `json:"members"`
		Verdicts map[string]int `json:"verdicts"`
	}
	if err := json.Unmarshal([]byte(batch.Detail), &detail); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(map[string]int{"new": 2, "skipped_unchanged": 1, "replaced_in_batch": 1})
	if detail.FirstSeq != 2 || detail.LastSeq != 3 || fmt.Sprint(detail.Members) != fmt.Sprint([]string{ans.Written[0].MemoryID, ans.Written[1].MemoryID}) ||
		fmt.Sprint(detail.Verdicts) != want {
		t.Fatalf("the batch row's account: %s; want seqs 2..3, members %s and %s, verdicts %s", batch.Detail,
			ans.Written[0].MemoryID, ans.Written[1].MemoryID, want)
	}

	// The chain verifies, checkpoints at the batch's own row, and verifies against it.
	if _, err := auditchain.Verify(ctx, conn, pool, org, ns); err != nil {
		t.Fatalf("the chain with a batch row: %v", err)
	}
	if ok, err := auditchain.CheckpointNamespace(ctx, conn, pool, auditchain.Namespace{Org: org, Namespace: ns}, 1000); err != nil || !ok {
		t.Fatalf("checkpoint the chain: %v %v", ok, err)
	}
	if rep, err := auditchain.Verify(ctx, conn, pool, org, ns); err != nil || rep.Rows != 4 || rep.Checkpoints != 1 {
		t.Fatalf("the checkpointed chain: %+v %v; want 4 rows, 1 checkpoint met", rep, err)
	}
	// A later write chains after the batch row, and the next checkpoint pass reads the
	// checkpointed seq's two rows again.
	if _, err := tc.Set(ctx, ns, "lunch", client.SetRequest{Value: "lunch is at one"}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitProjected(t, pool, "main", org, ns)
	if ok, err := auditchain.CheckpointNamespace(ctx, conn, pool, auditchain.Namespace{Org: org, Namespace: ns}, 1000); err != nil || !ok {
		t.Fatalf("the second checkpoint: %v %v", ok, err)
	}

	// namespace.audit shows the account, and a page ends with the whole of its last seq.
	page, err := tc.NamespaceAudit(ctx, ns, client.AuditOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Rows) != 4 || page.Rows[3].Op != "memory.bulk_set.batch" || len(page.Rows[3].Detail) == 0 || string(page.Rows[2].Detail) != `{"verdict":"new"}` ||
		page.NextAfterSeq == nil || *page.NextAfterSeq != 3 {
		t.Fatalf("a page of 3 over seq 3's two rows: %+v", page)
	}

	// A replay of the topic by a fresh projection writes the same rows and hashes: the
	// note rides on the record.
	before := hashes(t, conn, org, ns)
	if _, err := conn.Mutate(ctx, ch.Mutation{Table: "audit_log", Where: "org = ? AND namespace = ?", Args: []any{org, ns}}); err != nil {
		t.Fatal(err)
	}
	replay := strings.ReplaceAll(testenv.Unique(t, "replay"), "-", "_")
	env.Projector(t, replay)
	testenv.WaitProjected(t, pool, replay, org, ns)
	if after := hashes(t, conn, org, ns); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a replay wrote other rows:\n before %v\n after  %v", before, after)
	}
	if _, err := auditchain.Verify(ctx, conn, pool, org, ns); err != nil {
		t.Fatalf("the replayed chain: %v", err)
	}

	// Tampering with the batch row's account (an UPDATE of detail) breaks the chain at
	// its seq.
	if _, err := conn.Mutate(ctx, ch.Mutation{Table: "audit_log", Set: "detail = replaceOne(detail, '\"new\":2', '\"new\":1')",
		Where: "org = ? AND namespace = ? AND seq = 3 AND op = 'memory.bulk_set.batch'", Args: []any{org, ns}}); err != nil {
		t.Fatal(err)
	}
	_, err = auditchain.Verify(ctx, conn, pool, org, ns)
	if brk, ok := err.(*auditchain.Break); !ok || brk.Seq != 3 {
		t.Fatalf("a batch row's account changed: %v, want the chain broken at seq 3", err)
	}
	t.Logf("tampered: %v", err)
}
