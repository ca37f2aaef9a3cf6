package command

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// The write side's statements of loom.memory_current: the commit's write of a head and
// a redaction's scrub, an erasure's delete. Every read of the table is internal/heads'.

// queueContentKey queues the making of the key of a row's scope (org, namespace, user)
// that keys its content hash, unless the scope has one: queued before the row's
// writes, which hash under it (loom.content_hash, migration 101).
func queueContentKey(b *pgx.Batch, row *memrow.Row, key []byte) {
	b.Queue(`INSERT INTO loom.content_keys (org, namespace, user_id, key) VALUES ($1, $2, loom.named_user($1, $3), $4) ON CONFLICT DO NOTHING`,
		row.Org, row.Namespace, row.UserID, key)
}

// keyedContentSQL is the stored content hash of a row being written: its plain digest
// ($sha) keyed under its scope's key (org $1, namespace $2, user $4).
func keyedContentSQL(sha string) string {
	return `loom.content_hash($1, $2, (SELECT loom.user_ref($1, $4)), ` + sha + `)`
}

// queueHeadWrite queues the write of a row's head, sealed at rest (rec); its content
// hash keyed under its scope's key; its key, agent and session by their references
// (migrations 171, 173), computed with the org's key unwrapped once.
func queueHeadWrite(b *pgx.Batch, row *memrow.Row, rec *record) {
	b.Queue(`INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
			content_sha256, row, sealed, expires_at)
		SELECT $1, $2, w.r[2], loom.named_user($1, $4), w.r[3], w.r[1], $7, $8, $9, `+keyedContentSQL("$10")+`, $11, $13, $12
		FROM (SELECT loom.writer_refs($1, $6, $3, $5) AS r OFFSET 0) w
		ON CONFLICT (org, namespace, agent, user_id, session_id, memory_key) DO UPDATE SET
			memory_id = EXCLUDED.memory_id, version = EXCLUDED.version, seq = EXCLUDED.seq,
			content_sha256 = EXCLUDED.content_sha256, row = EXCLUDED.row, sealed = EXCLUDED.sealed,
			expires_at = EXCLUDED.expires_at, updated_at = now()`,
		row.Org, row.Namespace, row.Agent, row.UserID, row.SessionID, row.MemoryKey, row.MemoryID, row.Version, row.Seq,
		row.ContentSHA256, rec.payload, row.ExpiresAt, rec.sealed)
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
