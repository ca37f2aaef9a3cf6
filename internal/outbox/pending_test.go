package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
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
		keys[events.RecordID(rev.org, "names", seq)] = queueRevision(t, b, rev.org, "names", rev.user, seq, rev.textNames)
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

// queueRevision queues on b a journal row of user at seq, its text naming the user or
// not (sealed before migration 155), its data key, and its outbox row queued by
// reference; it returns the data key (stored raw).
func queueRevision(tb testing.TB, b *pgx.Batch, org, ns, user string, seq int64, textNames bool) []byte {
	tb.Helper()
	key, err := events.NewDataKey()
	if err != nil {
		tb.Fatal(err)
	}
	row := &memrow.Row{Identity: memrow.Identity{Org: org, Namespace: ns, Agent: "-", SessionID: "-", MemoryKey: fmt.Sprintf("k%d", seq)},
		MemoryID: fmt.Sprintf("00000000-0000-0000-0000-%012d", seq), Version: 1, Seq: seq, Status: memrow.StatusActive,
		Value: json.RawMessage(`"the harbour crane"`), ContentSHA256: "sha"}
	if textNames {
		row.UserID = user
	}
	payload, sealed, err := heads.AtRest(row, key)
	if err != nil {
		tb.Fatal(err)
	}
	b.Queue(`INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id,
		session_id, memory_key, memory_id, version, content_sha256, status, row, audit, sealed)
		VALUES ($1, $2, $3, 'memory.written', 'memory.set', '-', loom.named_user($1, $4), '-', $5, $6, 1, 'sha', 'active', $7, '{}', $8)`,
		org, ns, seq, user, row.MemoryKey, row.MemoryID, payload, sealed)
	b.Queue(`INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, $3, $4)`, org, ns, seq, key)
	vectors, err := SealVectors(key, Vectors{Embedding: []float32{1, 0}})
	if err != nil {
		tb.Fatal(err)
	}
	Queue(b, Record{Org: org, Namespace: ns, Seq: seq, Topic: "loom", Key: []byte("k"), Headers: []byte("[]"),
		Value: append(append([]byte("{"), stubField...), '}'), Vectors: vectors})
	return key
}

// BenchmarkPendingRead reads a round of rows pending in the outbox (8 and 64, of 7
// users, among 2,000 journal rows) and opens their texts, as the relay does: the user
// named from the text (text), against the read as it was before, every user named in
// Postgres by loom.user_name (sql).
func BenchmarkPendingRead(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.Migrated(b, postgres, "acme")
	batch := &pgx.Batch{}
	for seq := int64(1); seq <= 2000; seq++ {
		queueRevision(b, batch, "acme", "bench", fmt.Sprintf("user%d", seq%7), seq, true)
	}
	if err := pool.SendBatch(ctx, batch).Close(); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE loom.outbox; ANALYZE loom.memory_revisions; ANALYZE loom.revision_keys"); err != nil {
		b.Fatal(err)
	}
	plain := func(b []byte) ([]byte, error) { return b, nil }
	namedInSQL := strings.Replace(readPendingSQL, "r.user_id,", "loom.user_name(r.org, r.user_id),", 1)
	for _, rows := range []int{8, 64} {
		b.Run(fmt.Sprintf("rows=%d/text", rows), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				pending, err := ReadPending(ctx, pool, rows, nil)
				if err != nil || len(pending) != rows {
					b.Fatalf("read %d rows: %v", len(pending), err)
				}
				if err := NameUsers(ctx, pool, OpenTexts(pending, plain)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("rows=%d/sql", rows), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				read, err := pool.Query(ctx, namedInSQL, rows, []string{})
				if err != nil {
					b.Fatal(err)
				}
				pending, err := collectPending(read)
				if err != nil || len(pending) != rows {
					b.Fatalf("read %d rows: %v", len(pending), err)
				}
				for j := range pending { // the column held the name
					pending[j].Journal.UserID = pending[j].Journal.UserRef
				}
				OpenTexts(pending, plain)
			}
		})
	}
}
