package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/tests/testenv"
)

// The audit chain covers each row's key, content hash, user id, agent and session id
// (rows of the writer format, from envelope version 3 on) through a salted commitment
// the erasure leaves: changing any of them in ClickHouse (or dropping the salt they
// were committed under) breaks the verification at that row, and an erasure that
// scrubs them and their salt leaves the chain whole.
func TestTheAuditChainCoversKeyContentHashAndUserID(t *testing.T) {
	ctx := context.Background()
	_, c, org := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "auditsub")
	pool, conn := env.PG(t), env.CH(t)
	for _, w := range []struct{ key, value, user string }{
		{"office", "the office is in Leeds", "alice"}, {"standup", "the standup is at nine", "bob"},
	} {
		writer := client.Identity{UserID: w.user, Agent: "scout", SessionID: "s-" + w.user}
		if _, err := tc.Set(ctx, ns, w.key, client.SetRequest{Value: w.value, Identity: writer}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitProjected(t, pool, "main", org, ns)
	verify := func() error {
		t.Helper()
		_, err := auditchain.Verify(ctx, conn, pool, org, ns)
		return err
	}
	if err := verify(); err != nil {
		t.Fatalf("an untampered chain: %v", err)
	}
	var commitment, salt string
	if err := conn.QueryRow(ctx, "SELECT subject_commitment, subject_salt FROM loom.audit_log FINAL WHERE org = ? AND namespace = ? AND seq = 1",
		org, ns).Scan(&commitment, &salt); err != nil || len(commitment) != 64 || salt == "" {
		t.Fatalf("the first row's subject commitment %q and salt %q (%v)", commitment, salt, err)
	}
	set := func(seq int, assign string) {
		t.Helper()
		if _, err := conn.Mutate(ctx, ch.Mutation{Table: "audit_log", Set: assign, Where: "org = ? AND namespace = ? AND seq = ?",
			Args: []any{org, ns, uint64(seq)}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tamper := range []struct {
		seq          int
		change, undo string
	}{
		{1, "memory_key = 'forged'", "memory_key = 'office'"},
		{2, "user_id = 'mallory'", "user_id = 'bob'"},
		{1, "content_sha256 = '" + strings.Repeat("0", 64) + "'", ""},
		{2, "subject_salt = ''", "subject_salt = '" + saltOf(t, conn, org, ns, 2) + "'"},
		{1, "agent = 'mallory'", "agent = 'scout'"},
		{2, "session_id = 's-alice'", "session_id = 's-bob'"},
		{1, "agent = '', session_id = ''", "agent = 'scout', session_id = 's-alice'"},
	} {
		undo := tamper.undo
		if undo == "" {
			var sha string
			if err := conn.QueryRow(ctx, "SELECT content_sha256 FROM loom.audit_log FINAL WHERE org = ? AND namespace = ? AND seq = ?",
				org, ns, uint64(tamper.seq)).Scan(&sha); err != nil {
				t.Fatal(err)
			}
			undo = "content_sha256 = '" + sha + "'"
		}
		set(tamper.seq, tamper.change)
		err := verify()
		if brk, ok := err.(*auditchain.Break); !ok || brk.Seq != uint64(tamper.seq) {
			t.Fatalf("%s at seq %d: %v, want the chain broken at that row", tamper.change, tamper.seq, err)
		}
		t.Logf("%s: %v", tamper.change, err)
		set(tamper.seq, undo)
		if err := verify(); err != nil {
			t.Fatalf("after undoing %s: %v", tamper.change, err)
		}
	}

	// A scrub forged by blanking all four fields at once, with no erasure after it.
	forgeScrub(t, conn, verify, org, ns, 2)

	// An erasure of alice scrubs her row's fields and salt: the chain stays whole.
	c.Erasure(t, client.ErasureRequest{Namespace: ns, UserID: "alice"})
	testenv.WaitProjected(t, pool, "main", org, ns)
	var key, user, left, agent, session string
	var format uint8
	if err := conn.QueryRow(ctx, "SELECT memory_key, user_id, subject_salt, subject_commitment, agent, session_id, chain_format FROM loom.audit_log FINAL WHERE org = ? AND namespace = ? AND seq = 1",
		org, ns).Scan(&key, &user, &left, &commitment, &agent, &session, &format); err != nil || key != "" || user != "" || left != "" || len(commitment) != 64 ||
		agent != "" || session != "" || format != auditchain.FormatWriter {
		t.Fatalf("alice's audit row after the erasure: key %q user %q salt %q commitment %q agent %q session %q format %d (%v)",
			key, user, left, commitment, agent, session, format, err)
	}
	if err := conn.QueryRow(ctx, "SELECT agent, session_id FROM loom.audit_log FINAL WHERE org = ? AND namespace = ? AND seq = 2",
		org, ns).Scan(&agent, &session); err != nil || agent != "scout" || session != "s-bob" {
		t.Fatalf("bob's audit row after alice's erasure: agent %q session %q (%v), want them kept", agent, session, err)
	}
	if err := verify(); err != nil {
		t.Fatalf("the chain after the erasure: %v", err)
	}
}

func saltOf(t *testing.T, conn *ch.Conn, org, ns string, seq int) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), "SELECT subject_salt FROM loom.audit_log FINAL WHERE org = ? AND namespace = ? AND seq = ?",
		org, ns, uint64(seq)).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// forgeScrub blanks the key, content hash, user id and salt of row seq, as an erasure's
// scrub would, with no erasure of the namespace after it: the walk breaks at that row.
// The fields put back, the chain holds again.
func forgeScrub(t *testing.T, conn *ch.Conn, verify func() error, org, ns string, seq int) {
	t.Helper()
	ctx := context.Background()
	var key, sha, user, salt string
	if err := conn.QueryRow(ctx, "SELECT memory_key, content_sha256, user_id, subject_salt FROM loom.audit_log FINAL WHERE org = ? AND namespace = ? AND seq = ?",
		org, ns, uint64(seq)).Scan(&key, &sha, &user, &salt); err != nil {
		t.Fatal(err)
	}
	set := func(assign string) {
		t.Helper()
		if _, err := conn.Mutate(ctx, ch.Mutation{Table: "audit_log", Set: assign, Where: "org = ? AND namespace = ? AND seq = ?",
			Args: []any{org, ns, uint64(seq)}}); err != nil {
			t.Fatal(err)
		}
	}
	set("memory_key = '', content_sha256 = '', user_id = '', subject_salt = ''")
	err := verify()
	if brk, ok := err.(*auditchain.Break); !ok || brk.Seq != uint64(seq) {
		t.Fatalf("a scrub forged at seq %d: %v, want the chain broken at that row", seq, err)
	}
	t.Logf("forged scrub: %v", err)
	set(fmt.Sprintf("memory_key = '%s', content_sha256 = '%s', user_id = '%s', subject_salt = '%s'", key, sha, user, salt))
	if err := verify(); err != nil {
		t.Fatalf("after putting the forged scrub back: %v", err)
	}
}

// A replay writes blank the audit rows of the versions a redaction destroyed the keys
// of (it cannot open them); the redaction's own row, later in the chain and naming the
// same memory, explains them, so the replayed chain verifies.
func TestAReplayAfterARedactionVerifies(t *testing.T) {
	ctx := context.Background()
	_, c, org := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "auditredact")
	pool, conn := env.PG(t), env.CH(t)
	first, err := tc.Set(ctx, ns, "office", client.SetRequest{Value: "the office is in Leeds"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Set(ctx, ns, "office", client.SetRequest{Value: "the office is in York"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Redact(ctx, ns, "office", client.RedactRequest{Version: first.VersionText}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitProjected(t, pool, "main", org, ns)
	verify := func(when string) {
		t.Helper()
		if _, err := auditchain.Verify(ctx, conn, pool, org, ns); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	verify("the chain after the redaction")
	if _, err := conn.Mutate(ctx, ch.Mutation{Table: "audit_log", Where: "org = ? AND namespace = ?", Args: []any{org, ns}}); err != nil {
		t.Fatal(err)
	}
	replay := strings.ReplaceAll(testenv.Unique(t, "replay"), "-", "_")
	env.Projector(t, replay)
	testenv.WaitProjected(t, pool, replay, org, ns)
	var key, commitment string
	if err := conn.QueryRow(ctx, "SELECT memory_key, subject_commitment FROM loom.audit_log FINAL WHERE org = ? AND namespace = ? AND seq = ?",
		org, ns, uint64(first.Seq)).Scan(&key, &commitment); err != nil || key != "" || commitment == "" {
		t.Fatalf("the redacted version's replayed audit row: key %q commitment %q (%v), want a blank subject under its commitment", key, commitment, err)
	}
	verify("the replayed chain")
}

// A redaction scrubs the audit rows of the versions it redacts as an erasure scrubs
// its scope's: key, content hash, user id, salt, agent and session all go, so no audit
// row confirms a guess of the redacted value by its hash, and the chain still verifies
// (the redaction's own row, later in the chain, explains the blank subjects). The
// key's other versions keep theirs.
func TestARedactionScrubsItsVersionsAuditSubjects(t *testing.T) {
	ctx := context.Background()
	_, c, org := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "auditscrub")
	pool, conn := env.PG(t), env.CH(t)
	writer := client.Identity{UserID: "alice", Agent: "scout", SessionID: "s-alice"}
	first, err := tc.Set(ctx, ns, "office", client.SetRequest{Value: "the office is in Leeds", Identity: writer})
	if err != nil {
		t.Fatal(err)
	}
	second, err := tc.Set(ctx, ns, "office", client.SetRequest{Value: "the office is in York", Identity: writer})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitProjected(t, pool, "main", org, ns)
	type subject struct{ key, sha, user, salt, agent, session string }
	subjectAt := func(seq int64) subject {
		t.Helper()
		var s subject
		if err := conn.QueryRow(ctx, "SELECT memory_key, content_sha256, user_id, subject_salt, agent, session_id FROM loom.audit_log FINAL "+
			"WHERE org = ? AND namespace = ? AND seq = ?", org, ns, uint64(seq)).Scan(&s.key, &s.sha, &s.user, &s.salt, &s.agent, &s.session); err != nil {
			t.Fatalf("the audit row at seq %d: %v", seq, err)
		}
		return s
	}
	redactedSHA := subjectAt(first.Seq).sha
	if redactedSHA == "" || subjectAt(second.Seq).key != "office" {
		t.Fatalf("before the redaction the audit rows hold %+v and %+v, want their subjects", subjectAt(first.Seq), subjectAt(second.Seq))
	}

	if _, err := tc.Redact(ctx, ns, "office", client.RedactRequest{Version: first.VersionText, Identity: writer}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitProjected(t, pool, "main", org, ns)
	if got := subjectAt(first.Seq); got != (subject{}) {
		t.Errorf("the redacted version's audit row keeps %+v, want its subject scrubbed whole", got)
	}
	var holding uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM loom.audit_log FINAL WHERE org = ? AND namespace = ? AND content_sha256 = ?",
		org, ns, redactedSHA).Scan(&holding); err != nil || holding != 0 {
		t.Errorf("%d audit rows still hold the redacted value's content hash (%v)", holding, err)
	}
	if got := subjectAt(second.Seq); got.key != "office" || got.sha == "" || got.user != "alice" || got.salt == "" {
		t.Errorf("the unredacted version's audit row lost its subject: %+v", got)
	}
	if _, err := auditchain.Verify(ctx, conn, pool, org, ns); err != nil {
		t.Errorf("the chain after the redaction: %v", err)
	}
}
