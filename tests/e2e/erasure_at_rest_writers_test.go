package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/tests/testenv"
)

// memoryRowTables are the tables whose agent and session_id hold references
// (migration 173): what writerMarkersAtRest scans the files of.
var memoryRowTables = []string{"loom.memory_current", "loom.memory_revisions"}

// writerMarkersAtRest has the flow of TestErasureLeavesNothingAtRest write a memory of
// the erased user under an agent marker and a session marker, checks that it reads back
// with both, that no head or revision holds either in the clear (columns, row JSON,
// audit) and that the heads' and revisions' files hold their references; it answers
// the check to run after the erasure, its VACUUM and its CHECKPOINT: no file of those
// tables (heap, indexes, TOAST) holds either marker. The scan is of these tables'
// files alone: the WAL and the other tables a write with an agent and a session
// passes through (the outbox's plain envelope, the audit chain) are other units'.
func writerMarkersAtRest(t *testing.T, c *testenv.Client, pool *pgxpool.Pool, org, ns, user string) (afterErasure func()) {
	t.Helper()
	agent, session := marker(t), marker(t)
	key := "writers-" + marker(t)
	if r := c.Put(t, ns, key, map[string]any{"value": "written by an agent in a session", "user_id": user, "agent": agent, "session_id": session}); r.Status != http.StatusOK {
		t.Fatalf("set %s with an agent and a session: %d %s", key, r.Status, r.Body)
	}
	head := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/"+key+"?user_id="+user+"&agent="+agent+"&session_id="+session, nil)
	if head.Status != http.StatusOK {
		t.Fatalf("get %s by its agent and session: %d %s", key, head.Status, head.Body)
	}
	if got := head.JSON(t); got["agent"] != agent || got["session_id"] != session {
		t.Fatalf("the head answers agent %v and session %v, want %s and %s", got["agent"], got["session_id"], agent, session)
	}
	for _, m := range []string{agent, session} {
		if found := tablesHolding(t, pool, org, m, memoryRowTables...); len(found) > 0 {
			t.Errorf("before the erasure, these tables hold a writer marker in the clear: %v", found)
		}
	}
	var agentRef, sessionRef string
	if err := pool.QueryRow(context.Background(), `SELECT loom.agent_ref($1, $2), loom.session_ref($1, $3)`, org, agent, session).
		Scan(&agentRef, &sessionRef); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, pool, "CHECKPOINT")
	for _, ref := range []string{agentRef, sessionRef} {
		if found := relationFilesHolding(t, pool, ref, memoryRowTables...); len(found) == 0 {
			t.Errorf("before the erasure, no file of %v holds the reference %s", memoryRowTables, ref)
		}
	}
	return func() {
		t.Helper()
		if found := relationFilesHolding(t, pool, agent, memoryRowTables...); len(found) > 0 {
			t.Errorf("after the erasure, these files still hold the erased agent: %v", found)
		}
		if found := relationFilesHolding(t, pool, session, memoryRowTables...); len(found) > 0 {
			t.Errorf("after the erasure, these files still hold the erased session: %v", found)
		}
		// With the topic's version 3 (the outbox's records name them by reference) no
		// file of Postgres's, the WAL included, holds either.
		for _, marker := range []string{agent, session} {
			if found := filesHolding(t, env.Stack.Postgres.DataDir(), marker); len(found) > 0 {
				t.Errorf("after the erasure, Postgres files still hold the erased writer %q: %v", marker, pgRelations(t, pool, found))
			}
		}
	}
}

// relationFilesHolding lists the relations among tables, their indexes and their TOAST
// tables whose files (every segment and fork) hold needle.
func relationFilesHolding(t *testing.T, pool *pgxpool.Pool, needle string, tables ...string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `WITH t AS (SELECT c.oid, c.reltoastrelid FROM pg_class c WHERE c.oid = ANY($1::regclass[]))
		SELECT r::regclass::text, pg_relation_filepath(r) FROM (
			SELECT oid AS r FROM t
			UNION SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT oid FROM t)
			UNION SELECT reltoastrelid FROM t WHERE reltoastrelid <> 0
			UNION SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT reltoastrelid FROM t)) x`, tables)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var rel, path string
		if err := rows.Scan(&rel, &path); err != nil {
			t.Fatal(err)
		}
		base := filepath.Join(env.Stack.Postgres.DataDir(), path)
		segments, _ := filepath.Glob(base + ".*")
		forks, _ := filepath.Glob(base + "_*")
		for _, f := range append(append([]string{base}, segments...), forks...) {
			b, err := os.ReadFile(f)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(needle)) {
				found = append(found, fmt.Sprintf("%s (%s)", f, rel))
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return found
}
