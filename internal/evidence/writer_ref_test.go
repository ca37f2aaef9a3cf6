package evidence

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/extractqueue"
	"github.com/loomplane/loom/internal/learnings"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/pgtest"
	"github.com/loomplane/loom/internal/rowseal"
)

// rawKey is a data key stored raw (as a key made before LOOM_KEK is): loom.unwrapped_key
// and these tests' unwrap take it as it is.
func rawKey(t *testing.T) []byte {
	t.Helper()
	k, err := events.NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func asStored(k []byte) ([]byte, error) { return k, nil }

// conversationTables are the tables of the conversation's record that name an agent or
// a session (migration 176).
var conversationTables = []string{"loom.memory_evidence", "loom.memory_chunks", "loom.session_summaries",
	"loom.session_outcomes", "loom.learnings_queue", "loom.learnings_supporters", "loom.extraction_requests"}

// tablesHoldingText names the tables of conversationTables one of whose rows holds
// needle anywhere in its columns' text.
func tablesHoldingText(t *testing.T, pool *pgxpool.Pool, needle string) []string {
	t.Helper()
	var out []string
	for _, table := range conversationTables {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table+` t WHERE strpos(t::text, $1) > 0`, needle).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out = append(out, table)
		}
	}
	return out
}

// storedByReference fails unless every row of the record names agent and session by
// their references (and some row of each table but the outcomes' does).
func storedByReference(t *testing.T, pool *pgxpool.Pool, org, agent, session string) {
	t.Helper()
	ctx := context.Background()
	agentRef, sessionRef := pgtest.WriterRefs(t, pool, org, agent, session)
	for _, q := range []string{
		`SELECT count(*) FILTER (WHERE agent = $2 AND session_id = $3), count(*) FROM loom.memory_evidence WHERE org = $1`,
		`SELECT count(*) FILTER (WHERE agent = $2 AND session_id = $3), count(*) FROM loom.memory_chunks WHERE org = $1`,
		`SELECT count(*) FILTER (WHERE session_id = $3), count(*) FROM loom.session_summaries WHERE org = $1 AND $2::text IS NOT NULL`,
		`SELECT count(*) FILTER (WHERE agent = $2), count(*) FROM loom.learnings_queue WHERE org = $1 AND $3::text IS NOT NULL`,
		`SELECT count(*) FILTER (WHERE agent = $2 AND session_id = $3), count(*) FROM loom.learnings_supporters WHERE org = $1`,
	} {
		var keyed, all int
		if err := pool.QueryRow(ctx, q, org, agentRef, sessionRef).Scan(&keyed, &all); err != nil {
			t.Fatal(err)
		}
		if all == 0 || keyed != all {
			t.Errorf("%s: %d of %d rows name the agent and session by reference", q, keyed, all)
		}
	}
}

// readsAnswerTheClearNames reads the record back through each read that answers an
// agent or a session and fails unless each answers agent and session in the clear.
func readsAnswerTheClearNames(t *testing.T, pool *pgxpool.Pool, s Scope, agent, session string, turns int) {
	t.Helper()
	ctx := context.Background()
	same := func(how, gotAgent, gotSession string) {
		t.Helper()
		if (gotAgent != agent && gotAgent != "*") || gotSession != session {
			t.Errorf("%s answered agent %q session %q, want %q %q", how, gotAgent, gotSession, agent, session)
		}
	}
	window, err := Window(ctx, pool, s, session, 0, turns)
	if err != nil || len(window) != turns {
		t.Fatalf("Window read %d turns of %d (%v)", len(window), turns, err)
	}
	for _, o := range window {
		same("Window", o.Agent, o.SessionID)
	}
	last, err := Last(ctx, pool, Scope{Org: s.Org, Namespace: s.Namespace}, session, 1)
	if err != nil || len(last) != 1 {
		t.Fatalf("Last read %d turns (%v)", len(last), err)
	}
	same("Last", last[0].Agent, last[0].SessionID)
	if next, err := NextIndex(ctx, pool, s.Org, s.Namespace, s.UserID, session); err != nil || next != turns {
		t.Fatalf("NextIndex %d (%v), want %d", next, err, turns)
	}
	found, _, err := Candidates(ctx, pool, s, 10, []int64{1}, asStored)
	if err != nil || len(found) == 0 {
		t.Fatalf("Candidates read %d turns (%v)", len(found), err)
	}
	spans, err := Spans(ctx, pool, s.Org, s.Namespace, []Span{{UserID: s.UserID, SessionRef: found[0].SessionRef, From: 0, To: turns}}, asStored)
	if err != nil || len(spans[0]) != turns {
		t.Fatalf("Spans read %d turns of %d (%v)", len(spans[0]), turns, err)
	}
	same("Spans", spans[0][0].Agent, spans[0][0].SessionID)
	err = EachTurn(ctx, pool, s.Org, s.Namespace, asStored, func(o Opened, _ string, _ []string) error {
		same("EachTurn", o.Agent, o.SessionID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := RecentChunks(ctx, pool, s, 10, asStored)
	if err != nil || len(chunks) != 1 {
		t.Fatalf("RecentChunks read %d chunks (%v)", len(chunks), err)
	}
	same("RecentChunks", chunks[0].Agent, chunks[0].SessionID)
	if !strings.Contains(chunks[0].Text, "chunk text") {
		t.Errorf("RecentChunks answered the text %q", chunks[0].Text)
	}
	d, ok, err := NewestDigest(ctx, pool, s, session)
	if err != nil || !ok {
		t.Fatalf("NewestDigest: %v %v", ok, err)
	}
	same("NewestDigest", "*", d.SessionID)
	if d.Text != "digest text" {
		t.Errorf("NewestDigest answered the text %q", d.Text)
	}
	ds, err := NewestDigests(ctx, pool, s, 10, asStored)
	if err != nil || len(ds) != 1 {
		t.Fatalf("NewestDigests read %d (%v)", len(ds), err)
	}
	same("NewestDigests", "*", ds[0].SessionID)
	owed, err := OwedSessions(ctx, pool, Owing{Since: time.Now().Add(-time.Hour), IdleBefore: time.Now().Add(time.Hour), MinTurns: 1,
		Org: s.Org, Namespace: s.Namespace}, 10)
	if err != nil || len(owed) != 1 {
		t.Fatalf("OwedSessions read %d (%v)", len(owed), err)
	}
	same("OwedSessions", "*", owed[0].SessionID)
	ls, err := learnings.List(ctx, pool, s.Org, s.Namespace, agent, "", 10)
	if err != nil || len(ls) != 1 || len(ls[0].Supporters) != 1 {
		t.Fatalf("learnings.List of the agent read %d (%v)", len(ls), err)
	}
	same("learnings.List", ls[0].Agent, ls[0].Supporters[0].SessionID)
	if ls[0].Rule != "rule text" || ls[0].Supporters[0].Quote != "quote text" {
		t.Errorf("learnings.List answered %q %q", ls[0].Rule, ls[0].Supporters[0].Quote)
	}
}

// A turn, chunk, digest and learning written now name their agent and session by
// reference alone (no row holds either in the clear), and every read answers both in
// the clear, from the rows' sealed text.
func TestTheRecordNamesAgentAndSessionByReference(t *testing.T) {
	ctx := context.Background()
	pool := turnsDB(t)
	s := Scope{Org: "acme", Namespace: "ns", UserID: "alice"}
	agent, session := "agent-marker-7f3a", "session-marker-9c2e"
	at := time.Now().UTC().Add(-time.Minute)
	b := &pgx.Batch{}
	var turns []Turn
	var turnIDs []string
	for i := range 2 {
		key := rawKey(t)
		sealed, err := Seal(key, agent, session, "turn text", "")
		if err != nil {
			t.Fatal(err)
		}
		id := uuid.NewString()
		turnIDs = append(turnIDs, id)
		turns = append(turns, Turn{Org: s.Org, Namespace: s.Namespace, TurnID: id, Agent: agent, UserID: s.UserID, SessionID: session,
			Role: "user", MessageIndex: i, OccurredAt: at, Seq: 1, Source: SourceObserve, DataKey: key, Sealed: sealed})
	}
	QueueInsert(b, turns)
	ck := rawKey(t)
	chunkSealed, err := SealChunk(ck, agent, session, "user: chunk text")
	if err != nil {
		t.Fatal(err)
	}
	QueueInsertChunks(b, []Chunk{{Org: s.Org, Namespace: s.Namespace, ChunkID: uuid.NewString(), Agent: agent, UserID: s.UserID,
		SessionID: session, FirstIndex: 0, LastIndex: 1, OccurredAt: at, Seq: 1, Source: SourceObserve, DataKey: ck, Sealed: chunkSealed,
		TurnIDs: turnIDs}})
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	dk := rawKey(t)
	digestSealed, err := SealDigest(dk, session, "digest text")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := InsertDigest(ctx, pool, Digest{Org: s.Org, Namespace: s.Namespace, UserID: s.UserID, SessionID: session,
		WindowEnd: 0, Turns: 1, Model: "m", DataKey: dk, Sealed: digestSealed}); err != nil || !ok {
		t.Fatalf("InsertDigest: %v %v", ok, err)
	}
	rk, qk := rawKey(t), rawKey(t)
	rule, err := learnings.Seal(rk, rk, agent, "", "rule text")
	if err != nil {
		t.Fatal(err)
	}
	quote, err := learnings.Seal(qk, qk, agent, session, "quote text")
	if err != nil {
		t.Fatal(err)
	}
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		return learnings.Insert(ctx, tx, []learnings.Candidate{{Org: s.Org, Namespace: s.Namespace, CandidateID: uuid.NewString(),
			Agent: agent, UserID: s.UserID, SessionID: session, MessageIndex: 0, Rule: rule, Quote: quote}})
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, marker := range []string{agent, session} {
		if held := tablesHoldingText(t, pool, marker); len(held) > 0 {
			t.Errorf("%s is held in the clear by %v", marker, held)
		}
	}
	storedByReference(t, pool, s.Org, agent, session)
	readsAnswerTheClearNames(t, pool, s, agent, session, 2)
}

// Rows stored before migration 176 name their agent and session in the clear, and
// their sealed text holds neither (a chunk's, a digest's and a learning's is the bare
// text), nor does a deferred request hold them sealed (migration 177); the migrations
// rewrite them, and they read back as they were written.
func TestMigrationStoresExistingAgentsAndSessionsByReference(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.MigratedBefore(t, postgres, "176")
	s := Scope{Org: "acme", Namespace: "old", UserID: "alice"}
	agent, session := "old-agent-marker", "old-session-marker"
	if _, err := pool.Exec(ctx, `INSERT INTO loom.user_ref_keys (org, key) VALUES ($1, gen_random_bytes(32))`, s.Org); err != nil {
		t.Fatal(err)
	}
	seal := func(label string, plain []byte) ([]byte, []byte) {
		t.Helper()
		key := rawKey(t)
		out, err := rowseal.Seal(key, label, plain)
		if err != nil {
			t.Fatal(err)
		}
		return key, out
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	at := time.Now().UTC().Add(-time.Minute)
	var turnIDs []string
	for i := range 2 {
		text, err := json.Marshal(map[string]string{"text": "turn text"})
		if err != nil {
			t.Fatal(err)
		}
		key, sealed := seal(rowseal.LabelTurn, text)
		id := uuid.NewString()
		turnIDs = append(turnIDs, id)
		exec(`INSERT INTO loom.memory_evidence (org, namespace, turn_id, agent, user_id, session_id, role, message_index, occurred_at,
				seq, source, data_key, sealed) VALUES ($1, $2, $3, $4, loom.named_user($1, $5), $6, 'user', $7, $8, 1, 'observe', $9, $10)`,
			s.Org, s.Namespace, id, agent, s.UserID, session, i, at, key, sealed)
	}
	key, sealed := seal(rowseal.LabelChunk, []byte("user: chunk text"))
	exec(`INSERT INTO loom.memory_chunks (org, namespace, chunk_id, agent, user_id, session_id, first_index, last_index, occurred_at,
			seq, source, data_key, sealed) VALUES ($1, $2, gen_random_uuid(), $3, loom.named_user($1, $4), $5, 0, 1, $6, 1, 'observe', $7, $8)`,
		s.Org, s.Namespace, agent, s.UserID, session, at, key, sealed)
	key, sealed = seal(rowseal.LabelDigest, []byte("digest text"))
	exec(`INSERT INTO loom.session_summaries (org, namespace, user_id, session_id, window_end, turns, seq, model, data_key, sealed)
		VALUES ($1, $2, loom.named_user($1, $3), $4, 0, 1, 1, 'm', $5, $6)`, s.Org, s.Namespace, s.UserID, session, key, sealed)
	exec(`INSERT INTO loom.session_outcomes (org, namespace, user_id, session_id, window_end, seq, outcome, reflections, model)
		VALUES ($1, $2, loom.named_user($1, $3), $4, 1, 1, 'achieved', 0, 'm')`, s.Org, s.Namespace, s.UserID, session)
	candidate := uuid.NewString()
	key, sealed = seal(rowseal.LabelLearning, []byte("rule text"))
	exec(`INSERT INTO loom.learnings_queue (org, namespace, candidate_id, agent, source, generation, data_key, sealed)
		VALUES ($1, $2, $3, $4, 'assistant_turn', 1, $5, $6)`, s.Org, s.Namespace, candidate, agent, key, sealed)
	key, sealed = seal(rowseal.LabelLearning, []byte("quote text"))
	exec(`INSERT INTO loom.learnings_supporters (org, namespace, candidate_id, agent, user_id, session_id, message_index, generation,
			data_key, sealed) VALUES ($1, $2, $3, $4, loom.named_user($1, $5), $6, 0, 1, $7, $8)`,
		s.Org, s.Namespace, candidate, agent, s.UserID, session, key, sealed)

	exec(`INSERT INTO loom.extraction_requests (org, queue_id, namespace, agent, user_id, session_id, generation, token_id, token_role,
			status, messages) VALUES ($1, gen_random_uuid(), $2, $3, loom.named_user($1, $4), $5, 1, 't', 'writer', 'done', 2)`,
		s.Org, s.Namespace, agent, s.UserID, session)

	pgtest.MigrateRest(t, pool)
	for _, marker := range []string{agent, session} {
		if held := tablesHoldingText(t, pool, marker); len(held) > 0 {
			t.Errorf("%s is held in the clear by %v after the migration", marker, held)
		}
	}
	// A request's status answers its agent and session (migration 177) from its sealed copy.
	requests, err := extractqueue.List(ctx, pool, extractqueue.Filter{Org: s.Org})
	if err != nil || len(requests) != 1 {
		t.Fatalf("extractqueue.List read %d requests (%v)", len(requests), err)
	}
	if requests[0].Agent != agent || requests[0].SessionID != session || requests[0].UserID != s.UserID {
		t.Errorf("the request answers %q %q %q", requests[0].Agent, requests[0].SessionID, requests[0].UserID)
	}
	{
		agentRef, sessionRef := pgtest.WriterRefs(t, pool, s.Org, agent, session)
		var keyed int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM loom.extraction_requests WHERE org = $1 AND agent = $2 AND session_id = $3`,
			s.Org, agentRef, sessionRef).Scan(&keyed); err != nil || keyed != 1 {
			t.Errorf("%d requests name the agent and session by reference (%v)", keyed, err)
		}
	}
	storedByReference(t, pool, s.Org, agent, session)
	_, sessionRef := pgtest.WriterRefs(t, pool, s.Org, agent, session)
	var outcomes int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM loom.session_outcomes WHERE org = $1 AND session_id = $2`, s.Org, sessionRef).Scan(&outcomes); err != nil || outcomes != 1 {
		t.Fatalf("%d outcomes name the session by reference (%v)", outcomes, err)
	}
	readsAnswerTheClearNames(t, pool, s, agent, session, 2)
}
