package e2e

import (
	"context"
	"testing"
)

// A write's journal row carries the keyed content hash its head does, in its column
// and its audit: the commit takes it from the head it has just written rather than
// computing it again (command/revisions_store.go), so the two must agree with what
// loom.content_hash makes of the value's plain digest under the scope's key, for a
// first version and for a revision under another user's scope.
func TestTheJournalKeepsTheHeadsKeyedHash(t *testing.T) {
	e := newPhaseEnv(t, nil)
	ctx := context.Background()
	for _, w := range []struct{ key, user, value string }{
		{"colour", "-", "the hull is painted teal"},
		{"colour", "-", "the hull is painted ochre"},
		{"colour", "u-keyed", "the mast is painted ochre"},
	} {
		ans := e.ok(w.key, map[string]any{"value": w.value, "user_id": w.user})
		plain, _ := ans["content_sha256"].(string)
		seq := int64(ans["seq"].(float64))
		var head, journal, audit, want string
		if err := e.pool.QueryRow(ctx, `SELECT c.content_sha256, r.content_sha256, r.audit->>'content_sha256',
				loom.content_hash(r.org, r.namespace, r.user_id, $4)
			FROM loom.memory_revisions r JOIN loom.memory_current c USING (org, namespace, agent, user_id, session_id, memory_key)
			WHERE r.org = $1 AND r.namespace = $2 AND r.seq = $3`, e.org, e.ns, seq, plain).Scan(&head, &journal, &audit, &want); err != nil {
			t.Fatalf("read the hashes of seq %d: %v", seq, err)
		}
		if want == "" || want == plain {
			t.Fatalf("seq %d: the scope's keyed hash is %q, want a keyed one", seq, want)
		}
		if head != want || journal != want || audit != want {
			t.Errorf("seq %d (%s, user %s): head %q, journal %q, audit %q; want each %q", seq, w.key, w.user, head, journal, audit, want)
		}
	}
}
