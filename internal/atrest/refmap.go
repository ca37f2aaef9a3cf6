package atrest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The mapping's sources: the live clear values of an org ($1) that its rows name by
// reference, each with the prefix its reference is made with (events.UserRef,
// AgentRef, SessionRef, KeyRef; loom.user_ref, agent_ref, session_ref, key_ref):
//   - users: every user's name (loom.user_names, opened under the user's key), and the
//     user of each erasure ledger row whose sealed user still opens;
//   - memory keys, agents and sessions: the journal's rows (loom.memory_revisions,
//     whose sealed text holds them since migrations 171 and 173; every head is one of
//     its versions), the turns', the chunks', the session digests', the extraction
//     requests' and the learnings' (whose sealed text holds the agent and session,
//     migrations 130, 176 and 177), a page range at a time ($2, $3) so an org of any size is mapped in
//     statements of bounded size.
//
// An erased user has neither a name nor rows, so no value here maps their reference.
var refSources = []struct{ table, values string }{
	{"", `SELECT convert_from(decrypt(n.sealed, loom.unwrapped_user_key(n.org, n.key, n.wrap), 'aes'), 'UTF8') AS clear, '' AS prefix
		FROM loom.user_names n WHERE n.org = $1
	UNION SELECT loom.ledger_user(l.org, l.scope), '' FROM loom.erasure_ledger l WHERE l.org = $1 AND l.scope ? 'user_ref'`},
	{"loom.memory_revisions", `WITH o AS MATERIALIZED (SELECT loom.opened_row(r.row, r.sealed, r.org, r.namespace, r.seq) AS row
			FROM loom.memory_revisions r WHERE r.ctid >= $2 AND r.ctid < $3 AND r.org = $1)
		SELECT o.row->>'memory_key' AS clear, 'loom.key:' AS prefix FROM o
		UNION SELECT o.row->>'agent', 'loom.agent:' FROM o
		UNION SELECT o.row->>'session_id', 'loom.session:' FROM o`},
	{"loom.memory_evidence", sealedSource("loom.memory_evidence", "data_key", "sealed", "loom.turn")},
	{"loom.memory_chunks", sealedSource("loom.memory_chunks", "data_key", "sealed", "loom.chunk")},
	{"loom.session_summaries", sealedSource("loom.session_summaries", "data_key", "sealed", "loom.digest")},
	{"loom.extraction_requests", sealedSource("loom.extraction_requests", "who_key", "who", "loom.request.who")},
	{"loom.learnings_queue", sealedSource("loom.learnings_queue", "data_key", "sealed", "loom.learning")},
	{"loom.learnings_supporters", sealedSource("loom.learnings_supporters", "data_key", "sealed", "loom.learning")},
}

// sealedSource selects the agents and sessions a page range of table's rows seal
// (evidence.Seal, SealChunk, SealDigest, an extraction request's who, a learning: JSON with
// "agent" and "session") in column sealed, under the key in column key and label.
func sealedSource(table, key, sealed, label string) string {
	return fmt.Sprintf(`WITH o AS MATERIALIZED (SELECT convert_from(decrypt(e.%[3]s,
				hmac('%[4]s'::bytea, loom.unwrapped_key(e.%[2]s), 'sha256'), 'aes'), 'UTF8')::jsonb AS t
			FROM %[1]s e WHERE e.ctid >= $2 AND e.ctid < $3 AND e.org = $1 AND e.%[2]s IS NOT NULL AND e.%[3]s IS NOT NULL)
		SELECT o.t->>'agent' AS clear, 'loom.agent:' AS prefix FROM o
		UNION SELECT o.t->>'session', 'loom.session:' FROM o`, table, key, sealed, label)
}

// mapValues is the insert into the mapping of the references under the retired key
// and under the current one of the values a source selects.
const mapValues = `WITH k AS MATERIALIZED (SELECT loom.unwrapped_key(retired) AS old, loom.unwrapped_key(key) AS new
		FROM loom.user_ref_keys WHERE org = $1 AND retired IS NOT NULL),
	v AS (%s)
	INSERT INTO loom.ref_rotation_map (org, old, new)
	SELECT $1, encode(hmac(convert_to(v.prefix || v.clear, 'UTF8'), k.old, 'sha256'), 'hex'),
		encode(hmac(convert_to(v.prefix || v.clear, 'UTF8'), k.new, 'sha256'), 'hex')
	FROM v, k WHERE v.clear IS NOT NULL AND v.clear NOT IN ('', '-')
	ON CONFLICT (org, old) DO NOTHING`

// buildRefMap fills loom.ref_rotation_map with the reference under the retired key and
// under the current one of every live clear value of org, and answers how many
// references it holds.
func buildRefMap(ctx context.Context, pool *pgxpool.Pool, org string) (int64, error) {
	for _, src := range refSources {
		q := fmt.Sprintf(mapValues, src.values)
		if src.table == "" {
			if _, err := pool.Exec(ctx, q, org); err != nil {
				return 0, fmt.Errorf("map the users: %w", err)
			}
			continue
		}
		err := walk(ctx, pool, src.table, func(from, to pgtype.TID) error {
			_, err := pool.Exec(ctx, q, org, from, to)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("map what %s names: %w", src.table, err)
		}
	}
	var n int64
	err := pool.QueryRow(ctx, `SELECT count(*) FROM loom.ref_rotation_map WHERE org = $1`, org).Scan(&n)
	return n, err
}
