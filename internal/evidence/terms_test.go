package evidence

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/pgtest"
)

var postgres *devstack.Postgres

func TestMain(m *testing.M) { os.Exit(devstack.RunWithPostgres(m.Run, &postgres)) }

// turnsDB is a fresh database with Loom's schema and the org acme's user reference key.
func turnsDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return pgtest.Migrated(t, postgres, "acme")
}

// A question matches among the scope's limit newest turns only, whichever index finds
// the turns sharing its terms: an older turn sharing a term, another user's (for a
// bound scope) and another namespace's are never candidates, and the count of turns
// looked among is the cap, or every turn of a smaller scope.
func TestCandidatesAreTheNewestTurnsSharingATerm(t *testing.T) {
	ctx := context.Background()
	pool := turnsDB(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	insert := func(ns, user string, index, minute int, terms []int64) string {
		t.Helper()
		var id string
		if err := pool.QueryRow(ctx, `INSERT INTO loom.memory_evidence (org, namespace, turn_id, agent, user_id, session_id, role,
				message_index, occurred_at, seq, source, data_key, sealed, terms)
			VALUES ('acme', $1, gen_random_uuid(), '-', loom.named_user('acme', $2), 's', 'user', $3, $4, 1, 'observe', '\x00', '\x00', $5)
			RETURNING turn_id::text`, ns, user, index, t0.Add(time.Duration(minute)*time.Minute), terms).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	var ann []string // ann's turns in n1, oldest first: even ones share term 1
	for i := 0; i < 6; i++ {
		ann = append(ann, insert("n1", "ann", i, i, []int64{int64(1 + i%2), 99}))
	}
	bob := insert("n1", "bob", 0, 10, []int64{1})
	insert("n2", "ann", 0, 20, []int64{1})
	if _, err := pool.Exec(ctx, `ANALYZE loom.memory_evidence`); err != nil {
		t.Fatal(err)
	}
	noKeys := func([]byte) ([]byte, error) { return nil, fmt.Errorf("no turn is opened") }
	for _, c := range []struct {
		user    string
		limit   int
		want    []string
		scanned int
	}{
		{"ann", 4, []string{ann[4], ann[2]}, 4},
		{"ann", 10, []string{ann[4], ann[2], ann[0]}, 6},
		{"", 4, []string{bob, ann[4]}, 4},
		{"", 10, []string{bob, ann[4], ann[2], ann[0]}, 7},
	} {
		found, scanned, err := Candidates(ctx, pool, Scope{Org: "acme", Namespace: "n1", UserID: c.user}, c.limit, []int64{1, 7}, noKeys)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range found {
			got = append(got, f.TurnID)
			if want := map[string]string{bob: "bob"}[f.TurnID]; want != "" && f.UserID != want || want == "" && f.UserID != "ann" {
				t.Errorf("user %q, limit %d: turn %s answers user %q", c.user, c.limit, f.TurnID, f.UserID)
			}
		}
		if !slices.Equal(got, c.want) || scanned != c.scanned {
			t.Errorf("user %q, limit %d: candidates %v among %d, want %v among %d", c.user, c.limit, got, scanned, c.want, c.scanned)
		}
	}
}
