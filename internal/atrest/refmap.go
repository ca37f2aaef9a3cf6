package atrest

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// refClearValues are the live clear values of an org ($1) that its rows name by
// reference, each with the prefix its reference is made with (events.UserRef,
// AgentRef, SessionRef, KeyRef; loom.user_ref, agent_ref, session_ref, key_ref):
//   - users: every user's name (loom.user_names, opened under the user's key), and the
//     user of each erasure ledger row whose sealed user still opens;
//   - memory keys, agents and sessions: the journal's rows (loom.memory_revisions,
//     whose sealed text holds them since migrations 171 and 173; every head is one of
//     its versions) and the turns' (loom.memory_evidence, whose sealed text holds the
//     agent and session, migration 176).
//
// An erased user has neither a name nor rows, so no value here maps their reference.
const refClearValues = `
	SELECT convert_from(decrypt(n.sealed, loom.unwrapped_user_key(n.org, n.key, n.wrap), 'aes'), 'UTF8') AS clear, '' AS prefix
		FROM loom.user_names n WHERE n.org = $1
	UNION SELECT loom.ledger_user(l.org, l.scope), '' FROM loom.erasure_ledger l WHERE l.org = $1 AND l.scope ? 'user_ref'
	UNION SELECT o.row->>'memory_key', 'loom.key:' FROM o
	UNION SELECT o.row->>'agent', 'loom.agent:' FROM o
	UNION SELECT o.row->>'session_id', 'loom.session:' FROM o
	UNION SELECT x.t->>'agent', 'loom.agent:' FROM turns x
	UNION SELECT x.t->>'session', 'loom.session:' FROM turns x`

// buildRefMap fills loom.ref_rotation_map with the reference under the retired key and
// under the current one of every live clear value of org, and answers how many
// references it holds.
func buildRefMap(ctx context.Context, pool *pgxpool.Pool, org string) (int64, error) {
	_, err := pool.Exec(ctx, `WITH k AS MATERIALIZED (SELECT loom.unwrapped_key(retired) AS old, loom.unwrapped_key(key) AS new
			FROM loom.user_ref_keys WHERE org = $1 AND retired IS NOT NULL),
		o AS MATERIALIZED (SELECT loom.opened_row(r.row, r.sealed, r.org, r.namespace, r.seq) AS row
			FROM loom.memory_revisions r WHERE r.org = $1),
		turns AS MATERIALIZED (SELECT convert_from(decrypt(e.sealed, hmac('loom.turn'::bytea, loom.unwrapped_key(e.data_key), 'sha256'), 'aes'),
				'UTF8')::jsonb AS t
			FROM loom.memory_evidence e WHERE e.org = $1 AND e.data_key IS NOT NULL AND e.sealed IS NOT NULL),
		v AS (`+refClearValues+`)
		INSERT INTO loom.ref_rotation_map (org, old, new)
		SELECT $1, encode(hmac(convert_to(v.prefix || v.clear, 'UTF8'), k.old, 'sha256'), 'hex'),
			encode(hmac(convert_to(v.prefix || v.clear, 'UTF8'), k.new, 'sha256'), 'hex')
		FROM v, k WHERE v.clear IS NOT NULL AND v.clear NOT IN ('', '-')
		ON CONFLICT (org, old) DO NOTHING`, org)
	if err != nil {
		return 0, err
	}
	var n int64
	err = pool.QueryRow(ctx, `SELECT count(*) FROM loom.ref_rotation_map WHERE org = $1`, org).Scan(&n)
	return n, err
}
