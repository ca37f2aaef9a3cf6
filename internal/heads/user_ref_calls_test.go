package heads

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A read of a user's heads names the user once, not once a head it looks at: a
// reference is an HMAC under the org's unwrapped key (about 18 µs), so a predicate that
// calls loom.user_ref per row made a namespace of 20,000 heads cost 350 ms a scan. Counted
// by Postgres's own function statistics, not timed.
func TestAScanOfAUsersHeadsNamesTheUserOnce(t *testing.T) {
	ctx := context.Background()
	pool := migratedDB(t)
	insertHeads(t, pool, "many", "alice", 0, 150)
	insertHeads(t, pool, "many", "bob", 150, 300)
	tx, calls := seqScanCounting(t, pool)
	sc := Scope{Org: "acme", Namespace: "many", UserID: "alice"}
	if _, err := CountLocked(ctx, tx, sc); err != nil {
		t.Fatal(err)
	}
	rows, err := Unlocked(ctx, tx, sc, 500)
	if err != nil || len(rows) != 150 {
		t.Fatalf("alice's unlocked heads: %d, %v; want 150", len(rows), err)
	}
	inv, err := CountInventory(ctx, tx, "acme", "many", "", 10)
	if err != nil || inv.ByUser["alice"] != 150 || inv.ByUser["bob"] != 150 {
		t.Fatalf("inventory by user: %v, %v; want alice and bob 150 each", inv, err)
	}
	// Two scans and the inventory's two statements: one reference each at most; two names
	// a user group of the inventory (four groups: two users, one type, one status, live).
	if n := calls("user_ref"); n > 4 {
		t.Errorf("loom.user_ref ran %d times for 4 statements over 300 heads; want once a statement", n)
	}
	if n := calls("user_name"); n > 4 {
		t.Errorf("loom.user_name ran %d times to name 2 users' groups; want once a group", n)
	}
}

var _ Querier = pgx.Tx(nil)

// seqScanCounting opens a transaction (rolled back when t ends) that reads as the
// planner reads a namespace that is most of the table, a sequential scan, where a
// predicate is evaluated per row (an index's scan keys are evaluated once), and counts
// calls: how many times the loom function fn ran in it so far.
func seqScanCounting(t *testing.T, pool *pgxpool.Pool) (tx pgx.Tx, calls func(fn string) int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	for _, set := range []string{"track_functions = 'all'", "enable_indexscan = off", "enable_bitmapscan = off", "enable_indexonlyscan = off"} {
		if _, err := tx.Exec(ctx, "SET LOCAL "+set); err != nil {
			t.Fatal(err)
		}
	}
	return tx, func(fn string) int64 {
		t.Helper()
		var n int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions
			WHERE schemaname = 'loom' AND funcname = $1`, fn).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}
