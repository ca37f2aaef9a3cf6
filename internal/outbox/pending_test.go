package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pgtest"
)

var postgres *devstack.Postgres

func TestMain(m *testing.M) { os.Exit(devstack.RunWithPostgres(m.Run, &postgres)) }

// A revision's record names its user as the journal does: from its sealed text, and,
// for a revision sealed before migration 155 (whose text names no user), from its user
// column, named in its own org; the default identity is itself.
func TestPublishedRevisionsNameTheirUsers(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Migrated(t, postgres, "acme", "umbrella")
	type revision struct {
		org, user string
		textNames bool // the sealed text names the user (migration 155 on)
	}
	revs := []revision{
		{"acme", "alice", true},
		{"acme", "bob", false},
		{"umbrella", "bob", false},
		{"umbrella", "carol", true},
		{"acme", memrow.DefaultIdentity, false},
	}
	keys := map[string][]byte{}
	b := &pgx.Batch{}
	for i, rev := range revs {
		seq := int64(i + 1)
		key, err := events.NewDataKey()
		if err != nil {
			t.Fatal(err)
		}
		keys[events.RecordID(rev.org, "names", seq)] = key
		row := &memrow.Row{Identity: memrow.Identity{Org: rev.org, Namespace: "names", Agent: "-", SessionID: "-", MemoryKey: fmt.Sprintf("k%d", seq)},
			MemoryID: fmt.Sprintf("00000000-0000-0000-0000-%012d", seq), Version: 1, Seq: seq, Status: memrow.StatusActive,
			Value: json.RawMessage(`"the harbour crane"`), ContentSHA256: "sha"}
		if rev.textNames {
			row.UserID = rev.user
		}
		payload, sealed, err := heads.AtRest(row, key)
		if err != nil {
			t.Fatal(err)
		}
		b.Queue(`INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id,
			session_id, memory_key, memory_id, version, content_sha256, status, row, audit, sealed)
			VALUES ($1, 'names', $2, 'memory.written', 'memory.set', '-', loom.named_user($1, $3), '-', $4, $5, 1, 'sha', 'active', $6, '{}', $7)`,
			rev.org, seq, rev.user, row.MemoryKey, row.MemoryID, payload, sealed)
		b.Queue(`INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, 'names', $2, $3)`, rev.org, seq, key)
		vectors, err := SealVectors(key, Vectors{Embedding: []float32{1, 0}})
		if err != nil {
			t.Fatal(err)
		}
		Queue(b, Record{Org: rev.org, Namespace: "names", Seq: seq, Topic: "loom", Key: []byte("k"), Headers: []byte("[]"),
			Value: append(append([]byte("{"), stubField...), '}'), Vectors: vectors})
	}
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}

	pending, err := ReadPending(ctx, pool, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != len(revs) {
		t.Fatalf("read %d rows, want %d", len(pending), len(revs))
	}
	plain := func(b []byte) ([]byte, error) { return b, nil }
	if err := NameUsers(ctx, pool, OpenTexts(pending, plain)); err != nil {
		t.Fatal(err)
	}
	for i, row := range pending {
		value, _, err := Complete(row, plain)
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Sealed *events.Sealed }
		if err := json.Unmarshal(value, &v); err != nil {
			t.Fatal(err)
		}
		id := events.RecordID(row.Org, row.Namespace, row.Seq)
		c, err := events.Open(keys[id], id, v.Sealed)
		if err != nil {
			t.Fatal(err)
		}
		if want := revs[i]; c.UserID != want.user {
			t.Errorf("%s (text names its user: %v) is published as %q's, want %q's", id, want.textNames, c.UserID, want.user)
		}
	}
}
