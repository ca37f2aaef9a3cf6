package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

// conversationTables are the tables of the conversation's record (and beside it) whose
// agent and session columns hold references (migration 176).
var conversationTables = []string{"loom.memory_evidence", "loom.memory_chunks", "loom.memory_chunk_sources",
	"loom.session_summaries", "loom.session_outcomes", "loom.learnings_queue", "loom.learnings_supporters",
	"loom.extraction_requests"}

// conversationMarkersAtRest has the user observe turns under an agent marker and a
// session marker, defer an extraction of the session and search it with its trace
// kept, checks that recall
// answers both and that no row of the conversation's tables or the traces holds
// either in the clear, and returns the check to run after
// the erasure, VACUUM and CHECKPOINT: no file of those tables (heap, indexes, TOAST)
// holds either marker. The WAL is not scanned here: the memory.turns_observed record
// the outbox keeps names both in the clear (the topic's envelope, not these tables).
func conversationMarkersAtRest(t *testing.T, c *testenv.Client, pool *pgxpool.Pool, org, ns, user string) (afterErasure func()) {
	t.Helper()
	ctx := context.Background()
	agentMark, sessionMark := marker(t), marker(t)
	id := client.Identity{Agent: "agent-" + agentMark, UserID: user, SessionID: "session-" + sessionMark}
	if _, err := c.Typed(t).Observe(ctx, ns, client.ObserveRequest{Identity: id, Turns: []client.ObservedTurn{
		{Role: "user", Content: "the greenhouse key hangs behind the blue door"},
		{Role: "assistant", Content: "noted: behind the blue door"},
	}}); err != nil {
		t.Fatalf("observe the session: %v", err)
	}
	window := 1
	recalled, err := c.Typed(t).Recall(ctx, ns, client.RecallRequest{Query: "greenhouse key", Identity: client.Identity{UserID: user}, Window: &window})
	if err != nil || len(recalled.Hits) == 0 {
		t.Fatalf("recall the observed turns: %v", err)
	}
	for _, turn := range recalled.Hits[0].Window {
		if turn.Agent != id.Agent || turn.SessionID != id.SessionID {
			t.Errorf("recall answered a turn of agent %q session %q, want %q %q", turn.Agent, turn.SessionID, id.Agent, id.SessionID)
		}
	}
	// A deferred extraction of the session stays queued (the test's API runs no worker),
	// and its status answers the agent and the session.
	yes := true
	deferred, err := c.Typed(t).FromMessages(ctx, ns, client.FromMessagesRequest{Identity: id,
		Messages: messages("the greenhouse key hangs behind the blue door"), Defer: &yes})
	if err != nil {
		t.Fatalf("defer an extraction of the session: %v", err)
	}
	listed, err := c.Typed(t).ExtractionStatus(ctx, ns, client.ExtractionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	listedIt := false
	for _, x := range listed.Requests {
		if x.QueueID == deferred.QueueID {
			listedIt = true
			if x.Agent != id.Agent || x.SessionID != id.SessionID {
				t.Errorf("the deferred extraction's status answers agent %q session %q, want %q %q", x.Agent, x.SessionID, id.Agent, id.SessionID)
			}
		}
	}
	if !listedIt {
		t.Errorf("the status read does not list the deferred extraction %s", deferred.QueueID)
	}
	// A search narrowed to the session keeps its trace, which names the session.
	body, _ := json.Marshal(map[string]any{"query": "greenhouse key", "user_id": user, "session_id": id.SessionID, "trace": true})
	if r := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", body); r.Status != http.StatusOK || r.JSON(t)["trace_id"] == nil {
		t.Fatalf("a traced search of the session: %d %s", r.Status, r.Body)
	}
	for _, m := range []string{agentMark, sessionMark} {
		if found := tablesHolding(t, pool, org, m, append([]string{"loom.search_traces"}, conversationTables...)...); len(found) > 0 {
			t.Errorf("before the erasure, these tables hold the agent or session marker %s in the clear: %v", m, found)
		}
	}
	return func() {
		t.Helper()
		if found := fileListHolding(t, conversationFiles(t, pool), agentMark, sessionMark); len(found) > 0 {
			t.Errorf("the conversation's tables' files still hold the erased agent or session: %v", pgRelations(t, pool, found))
		}
		// The turns' and the deferred request's records name them by reference (envelope
		// version 3), so no file of Postgres's, the WAL included, holds either.
		for _, marker := range []string{agentMark, sessionMark} {
			if found := filesHolding(t, env.Stack.Postgres.DataDir(), marker); len(found) > 0 {
				t.Errorf("after the erasure, Postgres files still hold the erased writer %q: %v", marker, pgRelations(t, pool, found))
			}
		}
	}
}

// conversationFiles lists the files of conversationTables in Postgres's data
// directory: each table's, its indexes' and its TOAST table's, every segment and fork.
func conversationFiles(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT pg_relation_filepath(r) FROM (
			SELECT c.oid AS r FROM pg_class c WHERE c.oid = ANY($1::regclass[])
			UNION SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = ANY($1::regclass[])
			UNION SELECT c.reltoastrelid FROM pg_class c WHERE c.oid = ANY($1::regclass[]) AND c.reltoastrelid <> 0
			UNION SELECT i.indexrelid FROM pg_index i JOIN pg_class c ON i.indrelid = c.reltoastrelid WHERE c.oid = ANY($1::regclass[])) x
		WHERE pg_relation_filepath(r) IS NOT NULL`, conversationTables)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		base := filepath.Join(env.Stack.Postgres.DataDir(), p)
		out = append(out, base)
		for _, pattern := range []string{base + ".*", base + "_*"} { // segments, forks
			more, err := filepath.Glob(pattern)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, more...)
		}
	}
	if len(out) < len(conversationTables) {
		t.Fatalf("%d files for %d tables", len(out), len(conversationTables))
	}
	return out
}

// fileListHolding is filesHolding over a list of files (one vanished is skipped).
func fileListHolding(t *testing.T, files []string, needles ...string) []string {
	t.Helper()
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range needles {
			if bytes.Contains(b, []byte(n)) {
				out = append(out, fmt.Sprintf("%q in %s", n, f))
			}
		}
	}
	return out
}
