package heads

import (
	"context"
	"strings"
	"testing"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/pgtest"
)

// Rows of loom.shared, loom.decision_records and loom.category_links a Loom before
// migration 174 stored name their memory's key, agent and session in the clear (their
// primary keys too), and a decision's record who decided and the keys it supersedes.
// The migration rewrites them to the references Go computes (events.KeyRef, AgentRef,
// SessionRef), leaving "-" as it is, and making the org's key for an org that had none,
// and seals the record's text under a key of its own; no column holds a clear value
// after it.
func TestMigrationStoresOtherTablesKeysByReference(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.MigratedBefore(t, postgres, "174")
	const key, source, agent, session = "old-decision-key", "old-source-key", "old-agent", "old-session"
	for _, org := range []string{"acme", "anon"} {
		for _, q := range []string{
			`INSERT INTO loom.shared (org, namespace, memory_key, memory_id, seq, source_namespace, source_agent, source_user_id,
				source_session_id, source_key, source_memory_id, source_version, promoted_by)
				VALUES ($1, 'ns', $2, gen_random_uuid(), 1, 'ns', $4, '-', $5, $3, gen_random_uuid(), 1, 'token:x')`,
			`INSERT INTO loom.decision_records (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
				decided_by, supersedes, recorded_by) VALUES ($1, 'ns', $3, '-', $4, $2, gen_random_uuid(), 1, 1, 'review', '{old-superseded}', 'token:x')`,
			`INSERT INTO loom.category_links (org, namespace, agent, user_id, session_id, memory_key, category, seq, linked_by)
				VALUES ($1, 'ns', $3, '-', $4, $2, 'plans', 1, 'token:x'), ($1, 'ns', '-', '-', '-', $2, 'plans', 1, 'token:x')`,
		} {
			args := []any{org, key, agent, session}
			if strings.Contains(q, "loom.shared") {
				args = []any{org, key, source, agent, session}
			}
			if _, err := pool.Exec(ctx, q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO loom.user_ref_keys (org, key) VALUES ('acme', gen_random_bytes(32))`); err != nil {
		t.Fatal(err)
	}
	pgtest.MigrateRest(t, pool)
	for _, org := range []string{"acme", "anon"} {
		var orgKey []byte
		if err := pool.QueryRow(ctx, `SELECT loom.unwrapped_key(key) FROM loom.user_ref_keys WHERE org = $1`, org).Scan(&orgKey); err != nil {
			t.Fatalf("%s has no user reference key: %v", org, err)
		}
		keyRef, _ := events.KeyRef(orgKey, key)
		sourceRef, _ := events.KeyRef(orgKey, source)
		agentRef, _ := events.AgentRef(orgKey, agent)
		sessionRef, _ := events.SessionRef(orgKey, session)
		var shared, decisions, links, anonymous int
		var clear []string
		if err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM loom.shared WHERE org = $1 AND memory_key = $2 AND source_key = $3 AND source_agent = $4 AND source_session_id = $5),
			(SELECT count(*) FROM loom.decision_records WHERE org = $1 AND memory_key = $2 AND agent = $4 AND session_id = $5
				AND decided_by = '' AND supersedes = '{}' AND convert_from(decrypt(sealed, hmac('loom.decision'::bytea, data_key, 'sha256'), 'aes'), 'UTF8')::jsonb
					= '{"decided_by": "review", "supersedes": ["old-superseded"]}'),
			(SELECT count(*) FROM loom.category_links WHERE org = $1 AND memory_key = $2 AND agent = $4 AND session_id = $5),
			(SELECT count(*) FROM loom.category_links WHERE org = $1 AND memory_key = $2 AND agent = '-' AND session_id = '-'),
			array_remove(ARRAY[
				(SELECT 'loom.shared' FROM loom.shared t WHERE org = $1 AND t::text ~ 'old-' LIMIT 1),
				(SELECT 'loom.decision_records' FROM loom.decision_records t WHERE org = $1 AND t::text ~ 'old-' LIMIT 1),
				(SELECT 'loom.category_links' FROM loom.category_links t WHERE org = $1 AND t::text ~ 'old-' LIMIT 1)], NULL)`,
			org, keyRef, sourceRef, agentRef, sessionRef).Scan(&shared, &decisions, &links, &anonymous, &clear); err != nil {
			t.Fatal(err)
		}
		if shared != 1 || decisions != 1 || links != 1 || anonymous != 1 || len(clear) != 0 {
			t.Fatalf("%s: by reference %d of 1 promotion, %d of 1 decision record, %d+%d of 1+1 links; clear values in %v",
				org, shared, decisions, links, anonymous, clear)
		}
	}
}
