package e2e

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/tests/testenv"
)

// After an erasure, nothing Loom wrote still holds what was erased in the clear: not
// the topics (the change topic and the extraction topic: raw keys, headers and
// values), not Postgres's files (table files and WAL, after a VACUUM and a
// CHECKPOINT), not ClickHouse's data path (parts, the audit log's among them, and the
// mutation files kept beside them, once the replaced parts are cleaned up). Each
// needle is a marker no other test writes: one in the value, one in the key, one in
// the user id, and the plain SHA-256 of each value the key held, which a dictionary of
// guesses would confirm. And the data keys that seal it are stored wrapped: no file of
// Postgres holds one as it opens anything.
//
// Postgres is checked for the value, its plain hashes, the user id (every column names
// the user by reference, the id only in sealed text: migration 155) and the key
// (loom.memory_current's and loom.memory_revisions' key columns, so their unique keys,
// indexes and WAL records, hold the key's reference, the key only sealed text:
// migration 171); the stored content hashes are keyed under the scope's key, which the
// erasure destroys.
func TestErasureLeavesNothingAtRest(t *testing.T) {
	srv := llmtest.New(t)
	requests := env.CreateTopic(t, nil)
	// The API defers extractions to a topic of the test's own and runs no worker, so
	// the request stays queued until the erasure.
	n, url := env.API(t, func(c *config.Config) {
		withProvider(srv)(c)
		c.Command.Extraction.Topic, c.Command.Extraction.QueueEnabled = requests, false
	})
	org := testenv.Unique(t, "org")
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	ns := testenv.Unique(t, "rest")
	valueMark, keyMark, user := marker(t), marker(t), marker(t)
	key := "vault-" + keyMark
	// The plain SHA-256 of each value the key held (as memory.set hashes a canonical
	// value): Postgres keeps a keyed hash only, so none of its files may hold these.
	plainSHAs := writeTheVault(t, c, ns, key, user, valueMark, keyMark)
	yes := true
	if _, err := c.Typed(t).FromMessages(context.Background(), ns, client.FromMessagesRequest{Identity: client.Identity{UserID: user},
		Messages: messages("remember the vault code " + valueMark), Defer: &yes}); err != nil {
		t.Fatalf("defer an extraction: %v", err)
	}
	pool := env.PG(t)
	rawKeys := storedKeysAreWrapped(t, pool, org, ns)
	projectionHolds(t, org, ns, valueMark)

	searchAsTheUser(t, n, c, org, ns, user, key)
	writersAfterErasure := writerMarkersAtRest(t, c, pool, org, ns, user)

	// The scans below see what they scan: before the erasure, the projection's parts
	// hold the memory and Postgres's files the key's reference (the column). A part the
	// projection wrote is read back once the server has it on disk, which a query
	// seeing its rows does not promise: poll, to a deadline. Any of the markers will
	// do (a part's columns are compressed apart).
	testenv.Eventually(t, 2*time.Minute, "a file of ClickHouse's data path to hold the memory", func() bool {
		return len(filesHolding(t, env.Stack.ClickHouse.DataDir(), valueMark, keyMark, user)) > 0
	})
	postgresHoldsTheKeysReference(t, pool, org, key)
	if leaks := testenv.Leaks(env.TopicRecords(t), ns); len(leaks) == 0 {
		t.Fatal("before the erasure, the topic holds no record of the namespace")
	}
	if leaks := testenv.Leaks(env.Records(t, requests), ns); len(leaks) == 0 {
		t.Fatal("before the erasure, the extraction topic holds no request of the namespace")
	}
	// The keys as they open things are in no file of Postgres: not the table files,
	// not the WAL.
	testenv.Exec(t, pool, "CHECKPOINT")
	if found := filesHolding(t, env.Stack.Postgres.DataDir(), rawKeys...); len(found) > 0 {
		t.Errorf("Postgres files hold %d data keys unwrapped: %v", len(found), pgRelations(t, pool, found))
	}

	noClearUserBeforeErasure(t, pool, org, user)
	noClearKeyBeforeErasure(t, pool, org, keyMark)
	conversationAfterErasure := conversationMarkersAtRest(t, c, pool, org, ns, user)
	writersGone := writerMarkersOnTopicAndClickHouse(t, c, pool, org, ns, user, requests)
	promotedMark := keysOfOtherTablesAtRest(t, c, pool, org, ns, user, key, keyMark)
	tokenAfterErasure := tokenSessionShredded(t, n, c, pool, org, ns, user)
	promotedCopyGone := promotedCopyAtRest(t, pool, org, ns, requests, promotedMark)
	name := sealedName(t, pool, org, user)
	c.Erase(t, map[string]any{"user_id": user, "namespace": ns})
	nameOpensForNoOne(t, pool, org, user, name)
	writersGone()

	// The topics: every record, raw.
	if leaks := testenv.Leaks(env.TopicRecords(t), append([]string{valueMark, keyMark, user}, plainSHAs...)...); len(leaks) > 0 {
		t.Errorf("the topic still holds the erased memory in the clear: %v", leaks)
	}
	if leaks := testenv.Leaks(env.Records(t, requests), valueMark, user); len(leaks) > 0 {
		t.Errorf("the extraction topic still holds the erased request in the clear: %v", leaks)
	}

	// Postgres: dead tuples vacuumed, dirty pages written, then every file read.
	for _, stmt := range []string{"VACUUM", "CHECKPOINT"} {
		testenv.Exec(t, pool, stmt)
	}
	if found := filesHolding(t, env.Stack.Postgres.DataDir(), append([]string{valueMark, keyMark}, plainSHAs...)...); len(found) > 0 {
		t.Errorf("Postgres files still hold the erased value, its key or its plain SHA-256: %v", pgRelations(t, pool, found))
	}
	// The user id: every column that names a user holds its reference (events.UserRef),
	// the clear id only sealed text (migration 155), and the ledger the reference too.
	if found := filesHolding(t, env.Stack.Postgres.DataDir(), user); len(found) > 0 {
		t.Errorf("Postgres files still hold the erased user id: %v", pgRelations(t, pool, found))
	}
	writersAfterErasure()
	conversationAfterErasure()
	promotedKeyLeftNoClearTrace(t, pool, promotedMark)
	tokenAfterErasure()
	promotedCopyGone()

	// ClickHouse: the erasure's mutations rewrote the parts; the parts they replaced
	// go once the server cleans them up (old_parts_lifetime, set low in the test stack).
	if found := filesHoldingAfterCleanup(t, env.Stack.ClickHouse.DataDir(), append([]string{valueMark, keyMark, user}, plainSHAs...)...); len(found) > 0 {
		t.Errorf("ClickHouse's data path still holds the erased memory: %v", found)
	}
}

// writerMarkersOnTopicAndClickHouse writes, as the erased user, under an agent and a
// session id no other test names: a memory, observed turns and a deferred extraction
// request. Before the erasure the change topic names the agent (in the clear, or by
// reference from envelope version 3 on) and ClickHouse's data path holds both, so the
// scans see what they scan. It answers the check to run after the erasure: no record of
// the change topic or the extraction topic (raw keys, headers and values) nor any
// file of ClickHouse's data path holds the agent or the session id in the clear (the
// topic names them by reference and seals them; the erasure scrubs the audit log's
// agent and session of the chain's writer format, and deletes the scope's other rows).
func writerMarkersOnTopicAndClickHouse(t *testing.T, c *testenv.Client, pool *pgxpool.Pool, org, ns, user, requests string) func() {
	t.Helper()
	ctx := context.Background()
	agent, session := marker(t), marker(t)
	writer := client.Identity{Agent: agent, UserID: user, SessionID: session}
	if r := c.Put(t, ns, "writer-"+agent, map[string]any{"value": "written by the marked agent", "user_id": user,
		"agent": agent, "session_id": session}); r.Status != http.StatusOK {
		t.Fatalf("set as the marked writer: %d %s", r.Status, r.Body)
	}
	typed := c.Typed(t)
	if _, err := typed.Observe(ctx, ns, client.ObserveRequest{Identity: writer,
		Turns: []client.ObservedTurn{{Role: "user", Content: "the marked writer's turn"}}}); err != nil {
		t.Fatalf("observe as the marked writer: %v", err)
	}
	yes := true
	if _, err := typed.FromMessages(ctx, ns, client.FromMessagesRequest{Identity: writer,
		Messages: messages("the marked writer's request"), Defer: &yes}); err != nil {
		t.Fatalf("defer an extraction as the marked writer: %v", err)
	}
	var agentRef string
	if err := pool.QueryRow(ctx, `SELECT loom.agent_ref($1, $2)`, org, agent).Scan(&agentRef); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the change topic to name the marked agent", func() bool {
		return len(testenv.Leaks(env.TopicRecords(t), agent, agentRef)) > 0
	})
	testenv.Eventually(t, 2*time.Minute, "a file of ClickHouse's data path to hold the marked agent and session", func() bool {
		dir := env.Stack.ClickHouse.DataDir()
		return len(filesHolding(t, dir, agent)) > 0 && len(filesHolding(t, dir, session)) > 0
	})
	return func() {
		t.Helper()
		records := append(env.TopicRecords(t), env.Records(t, requests)...)
		if leaks := testenv.Leaks(records, agent, session); len(leaks) > 0 {
			t.Errorf("the topics still hold the erased writer's agent or session id in the clear: %v", leaks)
		}
		if found := filesHoldingAfterCleanup(t, env.Stack.ClickHouse.DataDir(), agent, session); len(found) > 0 {
			t.Errorf("ClickHouse's data path still holds the erased writer's agent or session id: %v", found)
		}
	}
}

// postgresHoldsTheKeysReference fails the test unless a file of Postgres's data
// directory holds key's reference (the column's form of it): the scan after the
// erasure reads files that held the key's row.
func postgresHoldsTheKeysReference(t *testing.T, pool *pgxpool.Pool, org, key string) {
	t.Helper()
	var keyRef string
	if err := pool.QueryRow(context.Background(), `SELECT loom.key_ref($1, $2)`, org, key).Scan(&keyRef); err != nil || keyRef == "" {
		t.Fatalf("the key's reference: %q, %v", keyRef, err)
	}
	if found := filesHolding(t, env.Stack.Postgres.DataDir(), keyRef); len(found) == 0 {
		t.Fatal("before the erasure, no file of Postgres's data directory holds the key's reference")
	}
}

// filesHoldingAfterCleanup is filesHolding of dir once none of its files holds a
// needle, or after three minutes: the parts an erasure's mutations replaced go only
// when the server cleans them up.
func filesHoldingAfterCleanup(t *testing.T, dir string, needles ...string) []string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		found := filesHolding(t, dir, needles...)
		if len(found) == 0 || time.Now().After(deadline) {
			return found
		}
		time.Sleep(time.Second)
	}
}

// writeTheVault writes the key twice as the user, the second time under an
// Idempotency-Key and once more as its retry (which replays the stored answer: it
// names the user and the value's plain hash), and answers the plain SHA-256 of each
// value, checked against the head's.
func writeTheVault(t *testing.T, c *testenv.Client, ns, key, user, valueMark, keyMark string) []string {
	t.Helper()
	var plainSHAs []string
	for i, v := range []string{"the vault code is %s", "the vault code changed to %s"} {
		value := fmt.Sprintf(v, valueMark)
		body, _ := json.Marshal(map[string]any{"value": value, "user_id": user, "tags": []string{"vault"}})
		var headers map[string]string
		if i == 1 {
			headers = map[string]string{"Idempotency-Key": "rest-" + keyMark}
		}
		for range 1 + i {
			if r := c.DoHeaders(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/"+key, body, headers); r.Status != http.StatusOK {
				t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
			}
		}
		quoted, _ := json.Marshal(value)
		canonical, err := memrow.Canonical("value", quoted)
		if err != nil {
			t.Fatal(err)
		}
		plainSHAs = append(plainSHAs, memrow.ContentSHA256(canonical))
	}
	head := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/"+key+"?user_id="+user, nil)
	if head.Status != http.StatusOK {
		t.Fatalf("get %s: %d %s", key, head.Status, head.Body)
	}
	sha, _ := head.JSON(t)["content_sha256"].(string)
	if sha != plainSHAs[1] {
		t.Fatalf("the head answers content_sha256 %q, want the value's SHA-256 %s", sha, plainSHAs[1])
	}
	return plainSHAs
}

// searchAsTheUser has the erased user's identity pass through what Postgres keeps of a
// read: a token bound to the user (loom.api_tokens), a search by it whose pool is
// parked for a next page (loom.search_pages) and whose trace is kept
// (loom.search_traces); the next page is read back, and the trace. A second memory
// of the user's, under key's prefix, gives the search a pool longer than its page.
func searchAsTheUser(t *testing.T, n *app.Process, c *testenv.Client, org, ns, user, key string) {
	t.Helper()
	if r := c.Put(t, ns, key+"-spare", map[string]any{"value": "the spare vault code", "user_id": user}); r.Status != http.StatusOK {
		t.Fatalf("set %s-spare: %d %s", key, r.Status, r.Body)
	}
	bound := testenv.NewClient(c.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: user}))
	search := func(body map[string]any) map[string]any {
		b, _ := json.Marshal(body)
		r := bound.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", b)
		if r.Status != http.StatusOK {
			t.Fatalf("search as the user: %d %s", r.Status, r.Body)
		}
		return r.JSON(t)
	}
	var first map[string]any
	testenv.Eventually(t, time.Minute, "a search as the user to leave a next page", func() bool {
		first = search(map[string]any{"query": "vault code", "user_id": user, "top_k": 1, "trace": true, "paging": true})
		return first["next_page_token"] != nil && first["next_page_token"] != ""
	})
	search(map[string]any{"query": "vault code", "user_id": user, "top_k": 1, "page_token": first["next_page_token"]})
	traceID, _ := first["trace_id"].(string)
	if r := bound.Do(t, http.MethodGet, "/v1/search-traces/"+traceID, nil); r.Status != http.StatusOK {
		t.Fatalf("read the kept trace %q: %d %s", traceID, r.Status, r.Body)
	}
}

// noClearUserBeforeErasure checks, before the erasure, the rows that a scan of the
// files may miss (a jsonb value compressed in TOAST, an unlogged table's rows gone at
// the VACUUM): no parked page, kept trace, stored answer or token holds the user's id
// in the clear, in any column.
func noClearUserBeforeErasure(t *testing.T, pool *pgxpool.Pool, org, user string) {
	t.Helper()
	if found := tablesHolding(t, pool, org, user, "loom.search_pages", "loom.search_traces", "loom.idempotency", "loom.api_tokens"); len(found) > 0 {
		t.Errorf("before the erasure, these tables hold the user's id in the clear: %v", found)
	}
	var pages, traces int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM loom.search_pages WHERE org = $1),
		(SELECT count(*) FROM loom.search_traces WHERE org = $1)`, org).Scan(&pages, &traces); err != nil || pages == 0 || traces == 0 {
		t.Fatalf("the search as the user parked %d pages and kept %d traces (%v), want some of each", pages, traces, err)
	}
}

// noClearKeyBeforeErasure checks, before the erasure, the rows that hold a memory's
// identity (a jsonb value may be compressed where a scan of the files would miss it):
// no head, revision (its columns, its row JSON, its audit), kept trace or parked page
// holds the key in the clear.
func noClearKeyBeforeErasure(t *testing.T, pool *pgxpool.Pool, org, keyMark string) {
	t.Helper()
	if found := tablesHolding(t, pool, org, keyMark, "loom.memory_current", "loom.memory_revisions", "loom.search_traces", "loom.search_pages"); len(found) > 0 {
		t.Errorf("before the erasure, these tables hold the memory's key in the clear: %v", found)
	}
}

// keysOfOtherTablesAtRest has the user's keys pass through the tables beside the
// memory rows that name a memory (migration 174): a decision recorded under a key of
// the marker, superseding another (its record seals the keys it supersedes), a
// category linked to the vault key, and a memory of the user's promoted. No table
// holds a key in the clear before the erasure; the scan of Postgres's files after it
// finds none in their indexes or the WAL's records of them. It answers the promoted
// key's own marker (promotedKeyLeftNoClearTrace).
func keysOfOtherTablesAtRest(t *testing.T, c *testenv.Client, pool *pgxpool.Pool, org, ns, user, key, keyMark string) string {
	t.Helper()
	if r := post(t, c, "/v1/namespaces/"+ns+"/decisions", map[string]any{"key": "decision-" + keyMark, "decision": "rotate the vault code",
		"decided_by": "the security review", "supersedes": []string{"old-decision-" + keyMark}, "user_id": user}); r.Status != http.StatusOK {
		t.Fatalf("decision.record: %d %s", r.Status, r.Body)
	}
	if r := post(t, c, "/v1/namespaces/"+ns+"/memories/"+key+":assign_category", map[string]any{"user_id": user,
		"categories": []string{"vaults"}}); r.Status != http.StatusOK {
		t.Fatalf("memory.assign_category: %d %s", r.Status, r.Body)
	}
	// The user's erasure withdraws the promoted copy (memrow.SharedUser's): its
	// versions redacted, then its rows deleted in both stores (promotedCopyAtRest). Its
	// key, its value and its relation's object (a name of the shared graph) hold a
	// marker of their own.
	promotedMark := marker(t)
	promoted := "promoted-" + promotedMark
	if r := c.Put(t, ns, promoted, map[string]any{"value": promotedValue(promotedMark), "user_id": user,
		"relations": []any{rel("the vault", "kept_by", promotedMark)}}); r.Status != http.StatusOK {
		t.Fatalf("set %s: %d %s", promoted, r.Status, r.Body)
	}
	if r := post(t, c, "/v1/namespaces/"+ns+"/memories/"+promoted+":promote", map[string]any{"user_id": user}); r.Status != http.StatusOK {
		t.Fatalf("memory.promote: %d %s", r.Status, r.Body)
	}
	tables := []string{"loom.decision_records", "loom.category_links", "loom.shared"}
	if got := testenv.PGStrings(t, pool, `SELECT 'decision' FROM loom.decision_records WHERE org = $1 AND memory_key = loom.key_ref($1, $2)
		UNION ALL SELECT 'category' FROM loom.category_links WHERE org = $1 AND memory_key = loom.key_ref($1, $3)
		UNION ALL SELECT 'shared' FROM loom.shared WHERE org = $1 AND memory_key = loom.key_ref($1, $4) AND source_key = loom.key_ref($1, $4)`,
		org, "decision-"+keyMark, key, promoted); len(got) != 3 {
		t.Errorf("the decision's record, the key's category link and the promotion by the keys' references: %v", got)
	}
	for _, m := range []string{keyMark, promotedMark} {
		if found := tablesHolding(t, pool, org, m, tables...); len(found) > 0 {
			t.Errorf("before the erasure, these tables hold a memory's key in the clear: %v", found)
		}
	}
	return promotedMark
}

// projectionHolds waits until a row of ClickHouse's projection of the namespace holds
// marker: the scans after the erasure see what they scan.
func projectionHolds(t *testing.T, org, ns, marker string) {
	t.Helper()
	conn := env.CH(t)
	testenv.Eventually(t, time.Minute, "the projection to hold the memory", func() bool {
		for _, n := range testenv.TextRows(t, conn, org, ns, marker) {
			if n > 0 {
				return true
			}
		}
		return false
	})
}

// promotedKeyLeftNoClearTrace fails the test if a file of Postgres's data directory
// (scanned after the VACUUM and CHECKPOINT) holds the promoted copy's key in the
// clear: its record, its redacted rows, the WAL's records of them.
func promotedKeyLeftNoClearTrace(t *testing.T, pool *pgxpool.Pool, promotedMark string) {
	t.Helper()
	if found := filesHolding(t, env.Stack.Postgres.DataDir(), promotedMark); len(found) > 0 {
		t.Errorf("Postgres files still hold the withdrawn promoted copy's key: %v", pgRelations(t, pool, found))
	}
}

// promotedValue is the value of the promoted memory, which holds its marker.
func promotedValue(promotedMark string) string {
	return "the vault is in the basement by " + promotedMark
}

// promotedCopyAtRest waits until ClickHouse holds the promoted copy (the row of
// memrow.SharedUser under the promoted key), and answers the check to run after the
// erasure, whose withdrawal of the copy leaves nothing that opens or names its key,
// value or the shared entity its relation named: Postgres keeps no head or revision of the copy (whose redaction keys, kept on
// its scrubbed revisions, would open its key for a holder of the KEK), and no record
// of the change topic or the extraction topic nor any file of ClickHouse's data path
// holds the marker of its key and value, or the value's plain SHA-256.
func promotedCopyAtRest(t *testing.T, pool *pgxpool.Pool, org, ns, requests, promotedMark string) func() {
	t.Helper()
	promoted := "promoted-" + promotedMark
	quoted, _ := json.Marshal(promotedValue(promotedMark))
	canonical, err := memrow.Canonical("value", quoted)
	if err != nil {
		t.Fatal(err)
	}
	plainSHA := memrow.ContentSHA256(canonical)
	conn := env.CH(t)
	testenv.Eventually(t, time.Minute, "ClickHouse to hold the promoted copy and the shared name its relation adds", func() bool {
		var rows, names uint64
		if err := conn.QueryRow(context.Background(), `SELECT
				(SELECT count() FROM loom.memory WHERE org = ? AND namespace = ? AND user_id = ? AND memory_key = ?),
				(SELECT count() FROM loom.entities WHERE org = ? AND namespace = ? AND user_id = ? AND name = ?)`,
			org, ns, memrow.SharedUser, promoted, org, ns, memrow.SharedUser, promotedMark).Scan(&rows, &names); err != nil {
			t.Fatal(err)
		}
		return rows > 0 && names > 0
	})
	return func() {
		t.Helper()
		var heads, revisions, sealed int
		if err := pool.QueryRow(context.Background(), `SELECT
				(SELECT count(*) FROM loom.memory_current WHERE org = $1 AND namespace = $2 AND memory_key = loom.key_ref($1, $3)),
				(SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = loom.key_ref($1, $3)),
				(SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = loom.key_ref($1, $3)
					AND redaction_key IS NOT NULL)`, org, ns, promoted).Scan(&heads, &revisions, &sealed); err != nil {
			t.Fatal(err)
		}
		if heads+revisions > 0 {
			t.Errorf("after the erasure, Postgres keeps %d heads and %d revisions of the withdrawn copy, %d with a redaction key that opens its key",
				heads, revisions, sealed)
		}
		records := append(env.TopicRecords(t), env.Records(t, requests)...)
		if leaks := testenv.Leaks(records, promotedMark, plainSHA); len(leaks) > 0 {
			t.Errorf("the topics still hold the withdrawn copy's key, value or plain SHA-256: %v", leaks)
		}
		if found := filesHoldingAfterCleanup(t, env.Stack.ClickHouse.DataDir(), promotedMark, plainSHA); len(found) > 0 {
			t.Errorf("ClickHouse's data path still holds the withdrawn copy's key, value, shared name or plain SHA-256: %v", found)
		}
	}
}

// tablesHolding answers which of tables hold needle in the clear in a row of org's:
// in its text, or, for loom.search_pages, in its packed pool.
func tablesHolding(t *testing.T, pool *pgxpool.Pool, org, needle string, tables ...string) []string {
	t.Helper()
	arms := make([]string, len(tables))
	for i, table := range tables {
		holds := "strpos(t::text, $2) > 0"
		if table == "loom.search_pages" {
			holds = "(" + holds + " OR position(convert_to($2, 'UTF8') IN coalesce(packed, '')) > 0)"
		}
		arms[i] = fmt.Sprintf("(SELECT '%s' FROM %s t WHERE org = $1 AND %s LIMIT 1)", table, table, holds)
	}
	var found []string
	if err := pool.QueryRow(context.Background(), `SELECT array_remove(ARRAY[`+strings.Join(arms, ", ")+`], NULL)`, org, needle).Scan(&found); err != nil {
		t.Fatal(err)
	}
	return found
}

// storedName is a user's sealed name as loom.user_names holds it, with the user's
// wrapped key beside it, and the org's name wrap key as loom.name_wrap_keys holds it
// (migration 158): what a dead tuple, the WAL or a backup keeps of them
// after an erasure.
type storedName struct {
	ref         string
	sealed, key []byte
	wrapKey     []byte
}

func sealedName(t *testing.T, pool *pgxpool.Pool, org, user string) storedName {
	t.Helper()
	var n storedName
	ctx := context.Background()
	if err := pool.QueryRow(ctx, `SELECT user_ref, sealed, key FROM loom.user_names WHERE org = $1 AND user_ref = loom.user_ref($1, $2)`,
		org, user).Scan(&n.ref, &n.sealed, &n.key); err != nil {
		t.Fatalf("the user's sealed name: %v", err)
	}
	if err := pool.QueryRow(ctx, `SELECT key FROM loom.name_wrap_keys WHERE org = $1`, org).Scan(&n.wrapKey); err != nil {
		t.Fatalf("the org's name wrap key: %v", err)
	}
	return n
}

// nameOpensForNoOne checks that after the erasure a copy of the user's sealed name
// opens under no key Postgres still holds, for a holder of the KEK: not the org's
// user reference key nor any key derived from it, not another user's name key, not a
// data key of the org's rows. The user's own key went with the name. Then the same
// after a KEK rotation, for the copy of the name with its wrapped key.
func nameOpensForNoOne(t *testing.T, pool *pgxpool.Pool, org, user string, name storedName) {
	t.Helper()
	ctx := context.Background()
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM loom.user_names WHERE org = $1 AND user_ref = $2`, org, name.ref).Scan(&left); err != nil || left > 0 {
		t.Errorf("after the erasure, loom.user_names keeps %d rows of the user (%v)", left, err)
	}
	keys := pgKeys(t, pool, `SELECT loom.unwrapped_key(key) FROM loom.user_ref_keys WHERE org = $1`, org)
	if len(keys) != 1 {
		t.Fatalf("the org holds %d user reference keys, want 1", len(keys))
	}
	orgKey := keys[0]
	keys = append(keys, pgKeys(t, pool, `SELECT loom.unwrapped_key(data_key) FROM loom.revision_keys WHERE org = $1
		UNION ALL SELECT loom.unwrapped_key(key) FROM loom.content_keys WHERE org = $1`, org)...)
	keys = append(keys, pgKeys(t, pool, `SELECT loom.unwrapped_user_key(org, key, wrap) FROM loom.user_names WHERE org = $1`, org)...)
	// Every key as it is, and each key the org's key derives: a name's (as migration
	// 155 sealed it) and the wrap of the users' keys.
	for _, label := range []string{"loom.user_name:" + name.ref, "loom.user_key.wrap"} {
		m := hmac.New(sha256.New, orgKey)
		m.Write([]byte(label))
		keys = append(keys, m.Sum(nil))
	}
	for _, k := range keys {
		if opened, ok := openAES(k, name.sealed); ok && opened == user {
			t.Errorf("after the erasure, a copy of the user's sealed name opens under a key Postgres still holds")
		}
	}
	// The KEK rotated, the old one destroyed: the kept copies of the user's sealed name
	// and wrapped key open under nothing still held.
	nameOpensForNoOneAfterRotation(t, org, user, name)
}

// pgKeys reads a one-column result of keys.
func pgKeys(t *testing.T, pool *pgxpool.Pool, q string, args ...any) [][]byte {
	t.Helper()
	rows, err := pool.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return keys
}

// openAES opens what pgcrypto's encrypt(..., 'aes') sealed: AES-CBC, a zero IV,
// PKCS#7 padding.
func openAES(key, sealed []byte) (string, bool) {
	block, err := aes.NewCipher(key)
	if err != nil || len(sealed) == 0 || len(sealed)%aes.BlockSize != 0 {
		return "", false
	}
	out := make([]byte, len(sealed))
	cipher.NewCBCDecrypter(block, make([]byte, aes.BlockSize)).CryptBlocks(out, sealed)
	pad := int(out[len(out)-1])
	if pad == 0 || pad > aes.BlockSize {
		return "", false
	}
	return string(out[:len(out)-pad]), true
}

// marker is a word no other test writes, for a scan of raw files to find: random
// letters and digits, so that the LZ4 blocks of ClickHouse's parts, which replace a
// run of four bytes or more seen earlier in the block by a reference to it, keep it
// whole (a marker sharing a prefix with other tests' markers, as a time stamp does,
// is stored split).
func marker(t *testing.T) string {
	t.Helper()
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "m" + string(b)
}

// storedKeysAreWrapped checks that the namespace's data keys (its content hash keys
// among them) and the org's user reference key are stored wrapped (none is the key it
// opens to, nor holds it) and returns the unwrapped keys, for a scan of the files.
func storedKeysAreWrapped(t *testing.T, pool *pgxpool.Pool, org, ns string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT data_key, loom.unwrapped_key(data_key) FROM loom.revision_keys WHERE org = $1 AND namespace = $2
		UNION ALL SELECT key, loom.unwrapped_key(key) FROM loom.user_ref_keys WHERE org = $1
		UNION ALL SELECT data_key, loom.unwrapped_key(data_key) FROM loom.extraction_requests WHERE org = $1 AND namespace = $2
		UNION ALL SELECT key, loom.unwrapped_key(key) FROM loom.content_keys WHERE org = $1 AND namespace = $2`, org, ns)
	if err != nil {
		t.Fatal(err)
	}
	var raw []string
	for rows.Next() {
		var stored, opened []byte
		if err := rows.Scan(&stored, &opened); err != nil {
			t.Fatal(err)
		}
		if len(stored) != kek.WrappedSize || len(opened) != kek.KeySize || bytes.Contains(stored, opened[:8]) {
			t.Errorf("a stored key of %d bytes opens to %d bytes: %x", len(stored), len(opened), stored)
		}
		raw = append(raw, string(opened))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(raw) < 5 { // two revisions, the org's user reference key, the deferred request's, the user's content hash key
		t.Fatalf("%d stored keys, want at least 5", len(raw))
	}
	return raw
}

// filesHolding lists, for each needle some file under dir holds, the needle and the
// files holding it (the first few, so a failure names every table that leaks). Files that vanish while it reads (a part the server removes, a WAL
// segment recycled) are skipped.
func filesHolding(t *testing.T, dir string, needles ...string) []string {
	t.Helper()
	first := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		for _, n := range needles {
			if len(first[n]) < 12 && bytes.Contains(b, []byte(n)) {
				first[n] = append(first[n], path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var out []string
	for _, n := range needles {
		for _, p := range first[n] {
			out = append(out, fmt.Sprintf("%q in %s", n, p))
		}
	}
	return out
}

// pgRelations names, in filesHolding's findings under Postgres's data directory, the
// relation each table file is of (a heap, an index, a TOAST table), so a failure says
// which table or index still holds a needle; WAL and other files keep their path.
func pgRelations(t *testing.T, pool *pgxpool.Pool, found []string) []string {
	t.Helper()
	node := regexp.MustCompile(`/base/[0-9]+/([0-9]+)(?:_[a-z]+)?(?:\.[0-9]+)?$`)
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f
		m := node.FindStringSubmatch(f)
		if m == nil {
			continue
		}
		var rel *string
		if err := pool.QueryRow(context.Background(), `SELECT pg_filenode_relation(0, $1::oid)::regclass::text`, m[1]).Scan(&rel); err == nil && rel != nil {
			out[i] = f + " (" + *rel + ")"
		}
	}
	return out
}
