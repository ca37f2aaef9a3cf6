package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/tests/testenv"
)

// The audit trail is verifiable (memory-architecture, "Audit rows"): every audit row
// carries its hash chained after the namespace's previous row; the checkpoint pass
// records where a verified chain reached; an erasure's scrub leaves the chain whole;
// a replay of the projection writes the same hashes; and a row changed in ClickHouse
// (ALTER TABLE UPDATE, or a replacing row inserted) fails the verification at that
// row.
func TestTheAuditChainVerifiesAndNamesATamperedRow(t *testing.T) {
	ctx := context.Background()
	_, c, org := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "audit")
	pool, conn := env.PG(t), env.CH(t)
	for i, v := range []string{"the office is in Leeds", "the standup is at nine", "the wiki lives on confluence"} {
		if _, err := tc.Set(ctx, ns, fmt.Sprintf("fact-%d", i), client.SetRequest{Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tc.Set(ctx, ns, "fact-1", client.SetRequest{Value: "the standup is at ten"}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitProjected(t, pool, "main", org, ns)
	scope := auditchain.Namespace{Org: org, Namespace: ns}

	verify := func() error {
		t.Helper()
		_, err := auditchain.Verify(ctx, conn, pool, org, ns)
		return err
	}
	if err := verify(); err != nil {
		t.Fatalf("an untampered chain: %v", err)
	}
	if ok, err := auditchain.CheckpointNamespace(ctx, conn, pool, scope, 1000); err != nil || !ok {
		t.Fatalf("checkpoint the chain: %v %v", ok, err)
	}
	rep, err := auditchain.Verify(ctx, conn, pool, org, ns)
	if err != nil || rep.Rows != 4 || rep.Legacy != 0 || rep.Checkpoints != 1 {
		t.Fatalf("the checkpointed chain: %+v %v, want 4 rows and 1 checkpoint met", rep, err)
	}

	// namespace.audit pages the rows with their hashes and the latest checkpoint.
	first, err := tc.NamespaceAudit(ctx, ns, client.AuditOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Rows) != 3 || first.NextAfterSeq == nil || *first.NextAfterSeq != 3 || first.Checkpoint == nil || first.Checkpoint.Seq != 4 ||
		first.Rows[0].PrevHash != "" || first.Rows[1].PrevHash != first.Rows[0].RowHash || first.Rows[0].MemoryKey != "fact-0" {
		t.Fatalf("namespace.audit's first page: %+v", first)
	}
	rest, err := tc.NamespaceAudit(ctx, ns, client.AuditOptions{AfterSeq: *first.NextAfterSeq})
	if err != nil || len(rest.Rows) != 1 || rest.NextAfterSeq != nil || rest.Rows[0].PrevHash != first.Rows[2].RowHash ||
		rest.Rows[0].RowHash != first.Checkpoint.RowHash {
		t.Fatalf("namespace.audit's last page: %+v %v", rest, err)
	}

	// An erasure scrubs the rows' keys, hashes and user ids and adds its own rows (its
	// request's, and its saga's started and completed): the chain stays whole.
	c.Erasure(t, client.ErasureRequest{Namespace: ns})
	testenv.WaitProjected(t, pool, "main", org, ns)
	if got := hashes(t, conn, org, ns); len(got) != 7 || !strings.Contains(got[4], ":"+auditchain.OpErasure+":") ||
		!strings.Contains(got[5], ":erasure.started:") || !strings.HasPrefix(got[6], "6:erasure.completed:") {
		t.Fatalf("audit rows after the erasure: %v, want the four writes', the erasure's and its saga's", got)
	}
	if err := verify(); err != nil {
		t.Fatalf("the chain after an erasure's scrub: %v", err)
	}
	before := hashes(t, conn, org, ns)

	// A replay of the topic by a fresh projection writes the same hashes.
	if _, err := conn.Mutate(ctx, ch.Mutation{Table: "audit_log", Where: "org = ? AND namespace = ?", Args: []any{org, ns}}); err != nil {
		t.Fatal(err)
	}
	replay := strings.ReplaceAll(testenv.Unique(t, "replay"), "-", "_")
	env.Projector(t, replay)
	testenv.WaitProjected(t, pool, replay, org, ns)
	if after := hashes(t, conn, org, ns); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a replay wrote other hashes:\n before %v\n after  %v", before, after)
	}
	if err := verify(); err != nil {
		t.Fatalf("the replayed chain: %v", err)
	}

	// Tampering: an UPDATE of one row's actor, then a replacing row of another.
	tamper := func(set string, seq int) {
		t.Helper()
		if _, err := conn.Mutate(ctx, ch.Mutation{Table: "audit_log", Set: set, Where: "org = ? AND namespace = ? AND seq = ?",
			Args: []any{org, ns, uint64(seq)}}); err != nil {
			t.Fatal(err)
		}
	}
	var actor string
	if err := conn.QueryRow(ctx, "SELECT actor FROM loom.audit_log FINAL WHERE org = ? AND namespace = ? AND seq = 2", org, ns).Scan(&actor); err != nil {
		t.Fatal(err)
	}
	tamper("actor = 'mallory'", 2)
	err = verify()
	if brk, ok := err.(*auditchain.Break); !ok || brk.Seq != 2 {
		t.Fatalf("a row changed by ALTER TABLE UPDATE: %v, want the chain broken at seq 2", err)
	}
	t.Logf("tampered: %v", err)
	tamper("actor = '"+strings.ReplaceAll(actor, "'", `\'`)+"'", 2)
	if err := verify(); err != nil {
		t.Fatalf("the row changed back: %v", err)
	}
	if err := conn.Exec(conn.Ctx(ctx), `INSERT INTO loom.audit_log (org, namespace, seq, op, event_type, occurred_at, actor, agent, user_id,
		session_id, memory_key, memory_id, version, content_sha256, source_class, status, request_id, prev_hash, row_hash)
		SELECT org, namespace, seq, op, event_type, occurred_at, actor, agent, user_id, session_id, memory_key, memory_id,
			version + 1, content_sha256, source_class, status, request_id, prev_hash, row_hash
		FROM loom.audit_log FINAL WHERE org = ? AND namespace = ? AND seq = 3`, org, ns); err != nil {
		t.Fatal(err)
	}
	err = verify()
	if brk, ok := err.(*auditchain.Break); !ok || brk.Seq != 3 {
		t.Fatalf("a replacing row inserted: %v, want the chain broken at seq 3", err)
	}
}

// hashes are the namespace's audit rows as seq:row_hash, in seq order.
func hashes(t *testing.T, conn *ch.Conn, org, ns string) []string {
	t.Helper()
	var out []string
	err := auditchain.EachRow(context.Background(), conn, auditchain.Namespace{Org: org, Namespace: ns}, 0, 0, func(r auditchain.Row) error {
		out = append(out, fmt.Sprintf("%d:%s:%s", r.Seq, r.Op, r.RowHash))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
