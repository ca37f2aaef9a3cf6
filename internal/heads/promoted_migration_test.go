package heads

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pgtest"
)

// A promoted row stored before migration 155 keeps its provenance, which names the
// source's user, in its `row` JSON. Migration 159 moves it into the row's sealed
// text: a head sealed since migration 056, a revision whose text is still in `row`
// (sealed with it), and a redacted revision, whose key is gone (the provenance goes,
// as a redaction's does since). No row's JSON names the source's user after, and the
// head and the unsealed revision read their provenance and text as before.
func TestMigrationSealsTheProvenanceOfOldPromotedRows(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.MigratedBefore(t, postgres, "159")
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const source = "bob-source-clear-id"
	id := memrow.Identity{Org: "acme", Namespace: "team", Agent: "-", UserID: memrow.SharedUser, SessionID: "-", MemoryKey: "drink"}
	exec(`INSERT INTO loom.user_ref_keys (org, key) VALUES ($1, gen_random_bytes(32))`, id.Org)
	shared := &memrow.Provenance{PromotedBy: "admin", Op: "memory.promote", SourceNamespace: "bob", SourceAgent: "-",
		SourceUserID: source, SourceSessionID: "-", SourceKey: "drink", SourceMemoryID: "00000000-0000-0000-0000-0000000000b0", SourceVersion: 1}
	text := `"the team drinks oolong"`
	// stored is a row as Loom stored it before migration 155 (its user blanked since):
	// its text sealed under a key of its own, or in its JSON (unsealed), and its
	// provenance in its JSON.
	stored := func(seq int64, unsealed bool) (payload, sealed, key []byte) {
		t.Helper()
		r := memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-000000000001", Version: seq, Seq: seq, Status: memrow.StatusActive,
			Value: json.RawMessage(text), Tags: []string{"t"}}
		key, err := events.NewDataKey()
		if err != nil {
			t.Fatal(err)
		}
		if payload, sealed, err = AtRest(&r, key); err != nil {
			t.Fatal(err)
		}
		if unsealed {
			r.Shared, r.UserID, sealed = shared, "", nil
			payload, err = json.Marshal(r)
		} else {
			var m map[string]any
			if err = json.Unmarshal(payload, &m); err == nil {
				m["shared"] = shared
				payload, err = json.Marshal(m)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		return payload, sealed, key
	}
	payload, sealed, key := stored(3, false)
	exec(`INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
		content_sha256, row, sealed) VALUES ($1, $2, $3, loom.named_user($1, $4), $5, $6, $7, 3, 3, '', $8, $9)`,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, "00000000-0000-0000-0000-000000000001", payload, sealed)
	exec(`INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, 3, $3)`, id.Org, id.Namespace, key)
	revision := func(seq int64, payload, sealed []byte) {
		t.Helper()
		exec(`INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key, memory_id,
			version, content_sha256, status, row, audit, sealed)
			VALUES ($1, $2, $3, 'memory.written', 'memory.promote', $4, loom.named_user($1, $5), $6, $7, '00000000-0000-0000-0000-000000000001', $3, '', 'active', $8, '{}', $9)`,
			id.Org, id.Namespace, seq, id.Agent, id.UserID, id.SessionID, id.MemoryKey, payload, sealed)
	}
	payload, _, key = stored(1, true)
	revision(1, payload, nil)
	exec(`INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, 1, $3)`, id.Org, id.Namespace, key)
	// The redacted one: no text, no key.
	redacted, err := json.Marshal(memrow.Row{Identity: id, MemoryID: "00000000-0000-0000-0000-000000000001", Version: 2, Seq: 2,
		Status: memrow.StatusActive, Redacted: true, Shared: shared})
	if err != nil {
		t.Fatal(err)
	}
	revision(2, redacted, nil)

	pgtest.MigrateRest(t, pool)
	var clear int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM loom.memory_current WHERE row ? 'shared' OR strpos(row::text, $1) > 0)
		+ (SELECT count(*) FROM loom.memory_revisions WHERE row ? 'shared' OR strpos(row::text, $1) > 0 OR strpos(row::text, 'oolong') > 0)`,
		source).Scan(&clear); err != nil || clear != 0 {
		t.Fatalf("%d rows still hold their provenance or text in their JSON (%v)", clear, err)
	}
	head, err := Read(ctx, pool, id)
	if err != nil || head == nil || head.Shared == nil || head.Shared.SourceUserID != source || string(head.Value) != text {
		t.Fatalf("the head reads %+v (%v)", head, err)
	}
	revs, err := KeyRevisions(ctx, pool, id)
	if err != nil || len(revs) != 2 {
		t.Fatalf("the revisions read %d (%v)", len(revs), err)
	}
	if r := revs[0]; r.Shared == nil || r.Shared.SourceUserID != source || string(r.Value) != text || len(r.Tags) != 1 {
		t.Fatalf("the unsealed revision reads %+v", r)
	}
	if r := revs[1]; r.Shared != nil {
		t.Fatalf("the redacted revision keeps its provenance: %+v", r.Shared)
	}
}
