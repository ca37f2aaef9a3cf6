package boot

import (
	"context"
	"reflect"
	"testing"

	"github.com/loomplane/loom/internal/boot"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/tests/testenv"
)

// A set of the projection tables that existed when a ClickHouse migration added a
// column (a rebuild under way across an upgrade, a set kept after a switch) gets the
// column at the next boot, in the serving table's order: otherwise a user's erasure,
// which mutates every set, fails on the kept set, and a rebuilt set that becomes the
// serving one refuses the projector's inserts.
func TestABootGivesAnOlderTableSetTheMigrationsColumns(t *testing.T) {
	ctx := context.Background()
	conn := env.CH(t)
	const old = "loom.audit_log__g990"
	exec := func(q string) {
		t.Helper()
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("CREATE TABLE " + old + " AS loom.audit_log")
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+old) })
	// As a set copied before migration 024 (the audit chain's writer format) holds it.
	exec("ALTER TABLE " + old + " DROP COLUMN chain_format")

	if err := boot.Migrate(ctx, env.PG(t), conn, quiet); err != nil {
		t.Fatalf("boot migrate: %v", err)
	}
	fence := erasure.Fence{Org: testenv.Unique(t, "org"), Namespace: "ns", UserID: "someone", Seq: 1 << 40}
	if err := erasure.Erase(ctx, conn, []erasure.Fence{fence}); err != nil {
		t.Fatalf("a user's erasure across the sets: %v", err)
	}
	if got, want := columns(t, conn, "audit_log__g990"), columns(t, conn, "audit_log"); !reflect.DeepEqual(got, want) {
		t.Fatalf("the older set's columns after the boot:\n%v\nthe serving table's:\n%v", got, want)
	}
}

func columns(t *testing.T, conn *ch.Conn, table string) []string {
	t.Helper()
	var out []string
	err := conn.Each(context.Background(), `SELECT name, type FROM system.columns WHERE database = 'loom' AND table = ?`,
		[]any{table}, func(scan func(dest ...any) error) error {
			var name, typ string
			if err := scan(&name, &typ); err != nil {
				return err
			}
			out = append(out, name+" "+typ)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
