package userref

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/pgtest"
)

var postgres *devstack.Postgres

func TestMain(m *testing.M) { os.Exit(devstack.RunWithPostgres(m.Run, &postgres)) }

// sqlRef is alice's reference as Postgres computes it now (loom.user_ref).
func sqlRef(t *testing.T, pool *pgxpool.Pool, org string) string {
	t.Helper()
	var ref string
	if err := pool.QueryRow(context.Background(), `SELECT loom.user_ref($1, 'alice')`, org).Scan(&ref); err != nil {
		t.Fatal(err)
	}
	return ref
}

// awaitRef waits until keys names alice as Postgres does, for at most limit.
func awaitRef(t *testing.T, keys *Keys, pool *pgxpool.Pool, org string, limit time.Duration) {
	t.Helper()
	want := sqlRef(t, pool, org)
	deadline := time.Now().Add(limit)
	for {
		got, err := keys.Ref(context.Background(), org, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the key was replaced: the process still names alice %s, Postgres %s", limit, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A process that cached an org's key names users under the key of the next
// generation within generationTTL: the rows it writes then are the rows Postgres's
// lookups find. (On main the cache kept the first key for the process's life.)
func TestAReplacedKeyReachesAProcessThatCachedIt(t *testing.T) {
	pool := pgtest.Migrated(t, postgres, "acme")
	keys := New(pool, nil)
	awaitRef(t, keys, pool, "acme", 0)
	if _, err := pool.Exec(context.Background(), `UPDATE loom.user_ref_keys SET key = gen_random_bytes(32), gen = gen + 1 WHERE org = 'acme'`); err != nil {
		t.Fatal(err)
	}
	awaitRef(t, keys, pool, "acme", 3*generationTTL)
}

// While a rotation runs, Live answers the current key first and the retired one after
// it, each with its generation; once the retired key is dropped, the current alone.
func TestLiveAnswersTheRetiredKeyWhileARotationRuns(t *testing.T) {
	pool := pgtest.Migrated(t, postgres, "acme")
	ctx := context.Background()
	keys := New(pool, nil)
	first, err := keys.Current(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if first.Gen != 1 {
		t.Fatalf("an org's first key is generation %d, want 1", first.Gen)
	}
	if _, err := pool.Exec(ctx, `UPDATE loom.user_ref_keys SET retired = key, retired_gen = gen, key = gen_random_bytes(32), gen = gen + 1
		WHERE org = 'acme'`); err != nil {
		t.Fatal(err)
	}
	awaitRef(t, keys, pool, "acme", 3*generationTTL)
	live, err := keys.Live(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 2 || live[0].Gen != 2 || live[1].Gen != 1 || !bytes.Equal(live[1].Key, first.Key) || bytes.Equal(live[0].Key, first.Key) {
		t.Fatalf("live keys during the rotation: %+v; want generation 2 (new), then 1 (the first key)", live)
	}
	refs, err := keys.Refs(ctx, "acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	old, err := events.UserRef(first.Key, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs[0] != sqlRef(t, pool, "acme") || refs[1] != old {
		t.Fatalf("alice's references during the rotation: %q; want the current key's (loom.user_ref's), then the first key's", refs)
	}
	if _, err := pool.Exec(ctx, `UPDATE loom.user_ref_keys SET retired = NULL, retired_gen = NULL WHERE org = 'acme'`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * generationTTL)
	for {
		if live, err = keys.Live(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		if len(live) == 1 && live[0].Gen == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("live keys after the retired key was dropped: %+v; want generation 2 alone", live)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
