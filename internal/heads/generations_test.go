package heads

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/memrow"
)

// While a rotation of the org's user reference key runs (migration 181: the old key
// kept as retired), a head whose columns were named under the retired key is still
// its identity's: Read and Many find it (migration 182's loom.identity_refs). Once the
// retired key is dropped they no longer do: the lookup matches by the live keys, not by
// chance. (Before migration 182 Read and Many missed it as soon as the key changed.)
func TestAHeadNamedUnderTheRetiredKeyIsReadDuringARotation(t *testing.T) {
	ctx := context.Background()
	pool := migratedDB(t)
	id := memrow.Identity{Org: "acme", Namespace: "gens", Agent: "planner", UserID: "alice", SessionID: "s1", MemoryKey: "tea"}
	r := &memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-000000000001", Version: 1, Seq: 1, Status: memrow.StatusActive}
	payload, sealed, _ := sealedAtRest(t, r)
	if _, err := pool.Exec(ctx, `INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
		content_sha256, row, sealed) SELECT $1, $2, w.r[2], loom.named_user($1, $4), w.r[3], w.r[1], $7, 1, 1, '', $8, $9
		FROM (SELECT loom.writer_refs($1, $6, $3, $5) AS r OFFSET 0) w`,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, r.MemoryID, payload, sealed); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE loom.user_ref_keys SET retired = key, retired_gen = gen, key = gen_random_bytes(32), gen = gen + 1
		WHERE org = 'acme'`); err != nil {
		t.Fatal(err)
	}
	found := func() (bool, int) {
		t.Helper()
		head, err := Read(ctx, pool, id)
		if err != nil {
			t.Fatal(err)
		}
		many, err := Many(ctx, pool, id.Org, id.Namespace, []memrow.Identity{id})
		if err != nil {
			t.Fatal(err)
		}
		return head != nil, len(many)
	}
	if read, many := found(); !read || many != 1 {
		t.Fatalf("during the rotation: Read found the head %v, Many %d heads; want true, 1", read, many)
	}
	// An erasure of the user across the org finds the namespace by either key's
	// reference (loom.user_refs bound as an array: ANY((SELECT ...))::text[]; without the
	// cast Postgres reads the subquery's one row as the array and the batch fails with
	// "operator does not exist: text = text[]").
	var namespaces []string
	b := &pgx.Batch{}
	QueueNamespacesOfUser(b, id.Org, id.UserID, &namespaces)
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatalf("read alice's namespaces during the rotation: %v", err)
	}
	if len(namespaces) != 1 || namespaces[0] != id.Namespace {
		t.Fatalf("alice's namespaces during the rotation: %q; want [%s]", namespaces, id.Namespace)
	}
	if _, err := pool.Exec(ctx, `UPDATE loom.user_ref_keys SET retired = NULL, retired_gen = NULL WHERE org = 'acme'`); err != nil {
		t.Fatal(err)
	}
	if read, many := found(); read || many != 0 {
		t.Fatalf("after the retired key was dropped: Read found the head %v, Many %d heads; want false, 0", read, many)
	}
}
