package command

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// The write side's statements of loom.memory_current: the commit's write of a head and
// a redaction's scrub, an erasure's delete. Every read of the table is internal/heads'.

// queueContentKey queues the making of the key of a row's scope (org, namespace, user)
// that keys its content hash, unless the scope has one: queued before the row's
// writes, which hash under it (loom.content_hash, migration 101). It keeps the user's
// name too (loom.named_user_ref), once for the row's statements, which bind the user's
// reference.
func queueContentKey(b *pgx.Batch, row *memrow.Row, refs columnRefs, key []byte) {
	b.Queue(`INSERT INTO loom.content_keys (org, namespace, user_id, key) VALUES ($1, $2, loom.named_user_ref($1, $3, $5), $4) ON CONFLICT DO NOTHING`,
		row.Org, row.Namespace, row.UserID, key, refs.user)
}

// queueHeadWrite queues the write of a row's head, sealed at rest (rec); its content
// hash keyed under its scope's key (in Go when the commit holds it: contentHashSQL); its user, key, agent and session by the
// references the commit computed (p.refs; migrations 155, 171, 173).
func queueHeadWrite(b *pgx.Batch, p *pending, rec *record) {
	row := p.row
	b.Queue(`INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
			content_sha256, row, sealed, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, `+contentHashSQL("$1", "$2", "$4", "$10", "$14::bytea", "$15::text")+`, $11, $13, $12)
		`+headUpsert,
		row.Org, row.Namespace, p.refs.agent, p.refs.user, p.refs.session, p.refs.key, row.MemoryID, row.Version, row.Seq,
		row.ContentSHA256, rec.payload, row.ExpiresAt, rec.sealed, p.contentKey.Stored, p.contentHash())
}

// headUpsert is the head write's update of a key that has a head.
const headUpsert = `ON CONFLICT (org, namespace, agent, user_id, session_id, memory_key) DO UPDATE SET
			memory_id = EXCLUDED.memory_id, version = EXCLUDED.version, seq = EXCLUDED.seq,
			content_sha256 = EXCLUDED.content_sha256, row = EXCLUDED.row, sealed = EXCLUDED.sealed,
			expires_at = EXCLUDED.expires_at, updated_at = now()`

// queueLockHeads queues, in one statement, a lock of each key's head on b (in the
// commit's transaction), taken in ids' order, and a read of their versions and seqs
// into versions[i] and seqs[i] (0 when a key has none). The identities are bound by
// the references the commit computed (refs[i] of ids[i]): nothing is derived in SQL
// under the namespace's generation lock. While a rotation of the org's reference key
// runs, retired[i] names ids[i] under the retired key (nil for a row it does not
// name; retired nil when no rotation runs): a key's head is then the one under
// refs[i] or, when it has none, the one under retired[i] (set_retired_heads.go), and
// both are locked.
func queueLockHeads(b *pgx.Batch, ids []memrow.Identity, refs []columnRefs, retired []*columnRefs, versions, seqs []*int64) {
	if len(ids) == 1 && retired == nil {
		id, r := ids[0], refs[0]
		b.Queue(`SELECT coalesce(max(version), 0), coalesce(max(seq), 0) FROM (SELECT version, seq FROM loom.memory_current
				WHERE org = $1 AND namespace = $2 AND agent = $3 AND user_id = $4 AND session_id = $5 AND memory_key = $6
				FOR UPDATE) h`, id.Org, id.Namespace, r.agent, r.user, r.session, r.key).
			QueryRow(func(row pgx.Row) error { return row.Scan(versions[0], seqs[0]) })
		return
	}
	n := len(ids)
	orgs, namespaces, agents, users, sessions, keys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, id := range ids {
		orgs[i], namespaces[i], agents[i], users[i], sessions[i], keys[i] = id.Org, id.Namespace, refs[i].agent, refs[i].user, refs[i].session, refs[i].key
	}
	args, sql := []any{orgs, namespaces, agents, users, sessions, keys}, lockHeadsSQL
	if retired != nil {
		rAgents, rUsers, rSessions, rKeys := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		for i := range ids {
			r := refs[i]
			if retired[i] != nil {
				r = *retired[i]
			}
			rAgents[i], rUsers[i], rSessions[i], rKeys[i] = r.agent, r.user, r.session, r.key
		}
		args, sql = append(args, rAgents, rUsers, rSessions, rKeys), lockHeadsAcrossGenerationsSQL
	}
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var ord, version, seq int64
			if err := rows.Scan(&ord, &version, &seq); err != nil {
				return err
			}
			*versions[ord-1], *seqs[ord-1] = version, seq
		}
		return rows.Err()
	})
}

// lockHeadsSQL is queueLockHeads' statement: a lateral read of each head, the keys
// scanned in ids' order, so each is locked in turn, in that order.
const lockHeadsSQL = `WITH t AS MATERIALIZED (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
				WITH ORDINALITY AS t(org, namespace, agent, user_id, session_id, memory_key, ord)
			ORDER BY t.ord)
		SELECT t.ord, coalesce(h.version, 0), coalesce(h.seq, 0)
		FROM t LEFT JOIN LATERAL (SELECT c.version, c.seq FROM loom.memory_current c
			WHERE c.org = t.org AND c.namespace = t.namespace AND c.agent = t.agent AND c.user_id = t.user_id
			  AND c.session_id = t.session_id AND c.memory_key = t.memory_key
			FOR UPDATE) h ON true`

// lockHeadsAcrossGenerationsSQL is lockHeadsSQL with a second lateral read of each
// key's head under the retired key's references ($7 to $10). Each is an equality on
// the key's identity: an OR of the two was planned as a scan of the namespace's heads
// (EXPLAIN: the index bound on org and namespace alone).
const lockHeadsAcrossGenerationsSQL = `WITH t AS MATERIALIZED (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
				WITH ORDINALITY AS t(org, namespace, agent, user_id, session_id, memory_key, r_agent, r_user_id, r_session_id, r_memory_key, ord)
			ORDER BY t.ord)
		SELECT t.ord, coalesce(h.version, r.version, 0), coalesce(h.seq, r.seq, 0)
		FROM t LEFT JOIN LATERAL (SELECT c.version, c.seq FROM loom.memory_current c
			WHERE c.org = t.org AND c.namespace = t.namespace AND c.agent = t.agent AND c.user_id = t.user_id
			  AND c.session_id = t.session_id AND c.memory_key = t.memory_key
			FOR UPDATE) h ON true
		LEFT JOIN LATERAL (SELECT c.version, c.seq FROM loom.memory_current c
			WHERE c.org = t.org AND c.namespace = t.namespace AND c.agent = t.r_agent AND c.user_id = t.r_user_id
			  AND c.session_id = t.r_session_id AND c.memory_key = t.r_memory_key
			FOR UPDATE) r ON true`

// queueContentKeys queues, in one statement, the making of the key of each row's scope
// (org, namespace, user) that keys its content hash, unless the scope has one: queued
// before the rows' writes, which hash under it (loom.content_hash, migration 101). keys
// are the fresh keys, one a row; of rows of one scope, the first's is kept. It keeps
// each user's name too (loom.named_user_ref), as queueContentKey.
func queueContentKeys(b *pgx.Batch, ps []*pending, recs []*record) {
	n := len(ps)
	orgs, namespaces, users, userRefs, keys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([][]byte, n)
	for i, p := range ps {
		r := p.row
		orgs[i], namespaces[i], users[i], userRefs[i], keys[i] = r.Org, r.Namespace, r.UserID, p.refs.user, recs[i].contentKey
	}
	b.Queue(`INSERT INTO loom.content_keys (org, namespace, user_id, key)
		SELECT t.org, t.namespace, loom.named_user_ref(t.org, t.user_id, t.user_ref), t.key
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[]) AS t(org, namespace, user_id, key, user_ref)
		ON CONFLICT DO NOTHING`,
		orgs, namespaces, users, keys, userRefs)
}

// queueHeadWrites queues, in one statement, the write of each row's head, sealed at rest
// (its record); its content hash keyed under its scope's key (in Go when the commit
// holds it: contentHashSQL); its user, key, agent and
// session by the references the commit computed (their refs). The rows are of
// distinct identities (a commit writes a head once).
func queueHeadWrites(b *pgx.Batch, ps []*pending, recs []*record) {
	n := len(ps)
	orgs, namespaces, agents, users, sessions, keys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ids, shas, payloads := make([]string, n), make([]string, n), make([]string, n)
	versions, seqs := make([]int64, n), make([]int64, n)
	expires := make([]*time.Time, n)
	sealed, storedKeys, goHashes := make([][]byte, n), make([][]byte, n), make([]string, n)
	for i, p := range ps {
		r, refs := p.row, p.refs
		orgs[i], namespaces[i], agents[i], users[i], sessions[i], keys[i] = r.Org, r.Namespace, refs.agent, refs.user, refs.session, refs.key
		ids[i], versions[i], seqs[i], shas[i] = r.MemoryID, r.Version, r.Seq, r.ContentSHA256
		payloads[i], expires[i], sealed[i] = string(recs[i].payload), r.ExpiresAt, recs[i].sealed
		storedKeys[i], goHashes[i] = p.contentKey.Stored, p.contentHash()
	}
	b.Queue(`INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
			content_sha256, row, sealed, expires_at)
		SELECT t.org, t.namespace, t.agent, t.user_id, t.session_id, t.memory_key, t.memory_id::uuid, t.version, t.seq,
			`+contentHashSQL("t.org", "t.namespace", "t.user_id", "t.sha", "t.hash_key", "t.go_hash")+`, t.row::jsonb, t.sealed, t.expires_at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[],
				$10::text[], $11::text[], $12::timestamptz[], $13::bytea[], $14::bytea[], $15::text[])
			AS t(org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq, sha, row, expires_at, sealed, hash_key, go_hash)
		`+headUpsert,
		orgs, namespaces, agents, users, sessions, keys, ids, versions, seqs, shas, payloads, expires, sealed, storedKeys, goHashes)
}

// queueScrubHead queues the scrub of a key's head: its text replaced by scrubbed, its
// sealed text (and plain content hash) replaced by sealed (heads.Redacted: its
// identity alone, under the redaction's key, kept on the revision at the head's seq),
// and its keyed content hash emptied too: the scope's key outlives a redaction, and
// would confirm a guess of the text. A row stored before migration 171, 173 (or 155)
// held its key, agent and session (or user) in its JSON: blanked here.
func queueScrubHead(b *pgx.Batch, id memrow.Identity, scrubbed string, sealed []byte) {
	b.Queue(heads.WithWriterRefs+`UPDATE loom.memory_current SET row = row || $7::jsonb || `+blankedIdentity+`, sealed = $8,
				content_sha256 = '', updated_at = now()
				WHERE org = $1 AND namespace = $2 AND `+heads.IdentityIs,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, scrubbed, sealed)
}

// blankedIdentity blanks the key, and a user, agent or session other than "-", of a
// memory row's JSON.
const blankedIdentity = `jsonb_build_object('memory_key', '')
	|| CASE WHEN row->>'user_id' NOT IN ('', '-') THEN jsonb_build_object('user_id', '') ELSE '{}' END
	|| CASE WHEN row->>'agent' NOT IN ('', '-') THEN jsonb_build_object('agent', '') ELSE '{}' END
	|| CASE WHEN row->>'session_id' NOT IN ('', '-') THEN jsonb_build_object('session_id', '') ELSE '{}' END`

// eraseWithdrawnHead deletes the head of a promoted copy an erasure withdrew
// (withdrawCopy), once it and every revision of its key are redacted: a copy promoted
// again since, or a version left with its text, keeps it. It reports whether the head
// went.
func eraseWithdrawnHead(ctx context.Context, tx pgx.Tx, id memrow.Identity) (bool, error) {
	tag, err := tx.Exec(ctx, heads.WithWriterRefs+`DELETE FROM loom.memory_current c
		WHERE org = $1 AND namespace = $2 AND `+heads.IdentityIs+` AND coalesce((row->>'redacted')::boolean, false)
		  AND NOT EXISTS (SELECT 1 FROM loom.memory_revisions r WHERE r.org = c.org AND r.namespace = c.namespace
		      AND r.agent = c.agent AND r.user_id = c.user_id AND r.session_id = c.session_id AND r.memory_key = c.memory_key
		      AND NOT coalesce((r.row->>'redacted')::boolean, false))`,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey)
	if err != nil {
		return false, fmt.Errorf("delete the withdrawn copy's head: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// headsTable names loom.memory_current where an erasure counts what it removed.
const headsTable = "loom.memory_current"

// eraseHeads deletes the heads in an erasure's scope below its fence (args as
// erasure.ScopeParams names them), returning the memory ids they held.
func eraseHeads(ctx context.Context, tx pgx.Tx, args []any) ([]string, error) {
	return collectStrings(tx.Query(ctx, erasure.ScopeParams+` DELETE FROM loom.memory_current t USING p WHERE `+pgScope(headsTable)+
		` RETURNING t.memory_id::text`, args...))
}

// queueRetiredHeadDeletes queues, beside the writes of ps' heads under the current
// key, the delete of each one's head under the retired key (none while no rotation
// runs): the written head is its next revision.
func queueRetiredHeadDeletes(b *pgx.Batch, ps []*pending) {
	var orgs, namespaces, agents, users, sessions, keys []string
	for _, p := range ps {
		if r := p.retiredRefs; r != nil {
			orgs, namespaces = append(orgs, p.row.Org), append(namespaces, p.row.Namespace)
			agents, users, sessions, keys = append(agents, r.agent), append(users, r.user), append(sessions, r.session), append(keys, r.key)
		}
	}
	if len(orgs) == 0 {
		return
	}
	b.Queue(`DELETE FROM loom.memory_current c USING unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
			AS t(org, namespace, agent, user_id, session_id, memory_key)
		WHERE c.org = t.org AND c.namespace = t.namespace AND c.agent = t.agent AND c.user_id = t.user_id
		  AND c.session_id = t.session_id AND c.memory_key = t.memory_key`,
		orgs, namespaces, agents, users, sessions, keys)
}
