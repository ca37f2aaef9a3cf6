package command

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
)

// The write side's statements of loom.memory_revisions and loom.revision_keys (the
// journal reads shared with the query side are internal/revisions').

// gapSQL reads the revisions committed after a seq, in seq order, at most a limit, as
// stored: the gap check opens them in Go (heads.ScanOpened) rather than in SQL, under
// the namespace's generation lock.
var gapSQL = `SELECT r.seq, ` + heads.Sealed("r") + ` FROM loom.memory_revisions r
	WHERE r.org = $1 AND r.namespace = $2 AND r.seq > $3 ORDER BY r.seq LIMIT $4`

// queueGap queues the read of the revisions committed after seq, at most limit, into
// gap; a row whose user its text does not name is named by unnamed.Name.
func queueGap(b *pgx.Batch, ring *kek.Ring, unnamed *heads.Unnamed, org, ns string, after int64, limit int, gap *[]gapRevision) {
	b.Queue(gapSQL, org, ns, after, limit).Query(func(rows pgx.Rows) error {
		var err error
		*gap, err = scanGap(rows, ring, unnamed, org)
		return err
	})
}

func readGap(ctx context.Context, q heads.Querier, ring *kek.Ring, org, ns string, after int64, limit int) ([]gapRevision, error) {
	rows, err := q.Query(ctx, gapSQL, org, ns, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read the admission gap: %w", err)
	}
	var unnamed heads.Unnamed
	gap, err := scanGap(rows, ring, &unnamed, org)
	if err != nil {
		return nil, err
	}
	if err := unnamed.Name(ctx, q); err != nil {
		return nil, fmt.Errorf("read the admission gap: %w", err)
	}
	return gap, nil
}

// scanGap keeps the gap's revisions that can still be peers: neither cleared nor
// redacted.
func scanGap(rows pgx.Rows, ring *kek.Ring, unnamed *heads.Unnamed, org string) ([]gapRevision, error) {
	defer rows.Close()
	var gap []gapRevision
	for rows.Next() {
		var g gapRevision
		row, ref, err := heads.ScanOpened(rows, ring, &g.seq)
		if err != nil {
			return nil, fmt.Errorf("read the admission gap: %w", err)
		}
		if row == nil || row.Redacted {
			continue // cleared or scrubbed: nothing left to be a peer
		}
		if ref != "" {
			unnamed.Hold(org, row, ref, nil)
		}
		g.row = row
		gap = append(gap, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the admission gap: %w", err)
	}
	return gap, nil
}

// queueRevision queues the journal's row of a revision, sealed at rest (rec); its
// user, key, agent and session by the references the commit computed (p.refs); its
// content hash, and its audit's, keyed under its scope's key. It is queued after the
// write of the row's head (queueInsert), whose keyed hash it takes: the same digest in
// the same scope, computed once per row rather than twice (loom.content_hash opens the
// scope's key and runs two HMACs in plpgsql).
func queueRevision(b *pgx.Batch, p *pending, rec *record) {
	row, refs := p.row, p.refs
	b.Queue(`INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key,
			memory_id, version, content_sha256, status, row, audit, sealed)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, h.sha, $12, $13, $14::jsonb || jsonb_build_object('content_sha256', h.sha), $15
		FROM (SELECT (SELECT c.content_sha256 FROM loom.memory_current c
			WHERE c.org = $1 AND c.namespace = $2 AND c.agent = $6 AND c.user_id = $7 AND c.session_id = $8 AND c.memory_key = $9) AS sha) h`,
		row.Org, row.Namespace, row.Seq, string(p.event), p.op, refs.agent, refs.user, refs.session, refs.key,
		row.MemoryID, row.Version, string(row.Status), rec.payload, rec.audit, rec.sealed)
}

// queueRevisionKey queues the data key that seals a revision on the topic.
func queueRevisionKey(b *pgx.Batch, row *memrow.Row, dataKey []byte) {
	b.Queue(`INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, $3, $4)`,
		row.Org, row.Namespace, row.Seq, dataKey)
}

// queueRevisions queues, in one statement, the journal's row of each revision, sealed
// at rest (its record); its user, key, agent and session by the references the commit
// computed (their refs); its content hash, and its audit's, keyed under its
// scope's key. It is queued after the write of the rows' heads (queueWrites), whose
// keyed hash it takes: the same digest in the same scope, computed once per row rather
// than twice (loom.content_hash opens the scope's key and runs two HMACs in plpgsql).
func queueRevisions(b *pgx.Batch, ps []*pending, recs []*record) {
	n := len(ps)
	orgs, namespaces, eventTypes, ops, agents, users := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	sessions, keys, ids, statuses, payloads, audits := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	seqs, versions := make([]int64, n), make([]int64, n)
	sealed := make([][]byte, n)
	for i, p := range ps {
		r, refs := p.row, p.refs
		orgs[i], namespaces[i], seqs[i], eventTypes[i], ops[i] = r.Org, r.Namespace, r.Seq, string(p.event), p.op
		agents[i], users[i], sessions[i], keys[i] = refs.agent, refs.user, refs.session, refs.key
		ids[i], versions[i], statuses[i] = r.MemoryID, r.Version, string(r.Status)
		payloads[i], audits[i], sealed[i] = string(recs[i].payload), string(recs[i].audit), recs[i].sealed
	}
	b.Queue(`INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key,
			memory_id, version, content_sha256, status, row, audit, sealed)
		SELECT t.org, t.namespace, t.seq, t.event_type, t.op, t.agent, t.user_id, t.session_id, t.memory_key,
			t.memory_id::uuid, t.version, h.sha, t.status, t.row::jsonb, t.audit::jsonb || jsonb_build_object('content_sha256', h.sha), t.sealed
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
				$10::text[], $11::bigint[], $12::text[], $13::text[], $14::text[], $15::bytea[])
			AS t(org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key, memory_id, version, status, row, audit, sealed),
			LATERAL (SELECT (SELECT c.content_sha256 FROM loom.memory_current c
				WHERE c.org = t.org AND c.namespace = t.namespace AND c.agent = t.agent AND c.user_id = t.user_id
				  AND c.session_id = t.session_id AND c.memory_key = t.memory_key) AS sha) h`,
		orgs, namespaces, seqs, eventTypes, ops, agents, users, sessions, keys, ids, versions, statuses, payloads, audits, sealed)
}

// queueRevisionKeys queues, in one statement, the data keys that seal revisions on the
// topic, one a row.
func queueRevisionKeys(b *pgx.Batch, rows []*memrow.Row, dataKeys [][]byte) {
	orgs, namespaces, seqs := make([]string, len(rows)), make([]string, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		orgs[i], namespaces[i], seqs[i] = r.Org, r.Namespace, r.Seq
	}
	b.Queue(`INSERT INTO loom.revision_keys (org, namespace, seq, data_key)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bytea[])`,
		orgs, namespaces, seqs, dataKeys)
}

// versionBefore is the newest version of a key's journal below version, 0 when none.
func versionBefore(ctx context.Context, tx pgx.Tx, id memrow.Identity, version int64) (int64, error) {
	var prev int64
	err := tx.QueryRow(ctx, heads.WithWriterRefs+`SELECT coalesce(max(version), 0) FROM loom.memory_revisions
			WHERE org = $1 AND namespace = $2 AND `+heads.IdentityIs+` AND version < $7`,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, version).Scan(&prev)
	return prev, err
}

// queueScrubRevisions queues the scrub of a key's revisions seqs: their text replaced
// by scrubbed, their sealed text (and plain content hash) by sealed (heads.Redacted),
// under the redaction's key, which each keeps (redactionKey, stored wrapped), and
// their keyed content hash, in the column and the audit, emptied (as queueScrubHead).
// The named version (namedSeq) takes this redaction's time; a copy keeps its first.
func queueScrubRevisions(b *pgx.Batch, id memrow.Identity, scrubbed string, seqs []int64, namedSeq int64, sealed, redactionKey []byte) {
	b.Queue(`UPDATE loom.memory_revisions SET row = row || $3::jsonb || `+blankedIdentity+`, sealed = $6, redaction_key = $7,
				content_sha256 = '', audit = audit || '{"content_sha256": ""}',
				redacted_at = CASE WHEN seq = $5 THEN now() ELSE coalesce(redacted_at, now()) END
			WHERE org = $1 AND namespace = $2 AND seq = ANY($4)`, id.Org, id.Namespace, scrubbed, seqs, namedSeq, sealed, redactionKey)
}

// queueDestroyKeys queues the deletion of the data keys of a namespace's revisions seqs.
func queueDestroyKeys(b *pgx.Batch, org, ns string, seqs []int64) {
	b.Queue(`DELETE FROM loom.revision_keys WHERE org = $1 AND namespace = $2 AND seq = ANY($3)`, org, ns, seqs)
}

// journalSQL reads the revisions of seqs $3..$4 of a namespace with what a record of
// each needs: its row (opened), event, op, verdict (empty when none), request id, audit
// note (NULL when none), data key (NULL when destroyed) and the version before it.
var journalSQL = `SELECT ` + heads.RowOf("r") + `, r.event_type, r.op, coalesce(r.audit->>'verdict', ''), coalesce(r.audit->>'request_id', ''), r.audit->'note', loom.unwrapped_key(k.data_key),
			coalesce((SELECT max(p.version) FROM loom.memory_revisions p
				WHERE p.org = r.org AND p.namespace = r.namespace AND p.agent = r.agent AND p.user_id = r.user_id
				  AND p.session_id = r.session_id AND p.memory_key = r.memory_key AND p.version < r.version), 0)
		FROM loom.memory_revisions r
		LEFT JOIN loom.revision_keys k USING (org, namespace, seq)
		WHERE r.org = $1 AND r.namespace = $2 AND r.seq BETWEEN $3 AND $4
		ORDER BY r.seq`

// statusBefore is the status of the key's newest earlier revision that is neither
// superseded nor rejected, from the authority's journal; active when none.
func (s *Service) statusBefore(ctx context.Context, h *memrow.Row) (memrow.Status, error) {
	var status string
	err := s.pool.QueryRow(ctx, heads.WithWriterRefs+`SELECT coalesce((SELECT status FROM loom.memory_revisions
		WHERE org = $1 AND namespace = $2 AND `+heads.IdentityIs+`
		  AND memory_id = $7 AND status NOT IN ('superseded', 'rejected')
		ORDER BY seq DESC LIMIT 1), 'active')`,
		h.Org, h.Namespace, h.Agent, h.UserID, h.SessionID, h.MemoryKey, h.MemoryID).Scan(&status)
	return memrow.Status(status), err
}

// retiredBy is the op of the revision that began the head's current supersession: the
// first superseded revision of the row after its last one that was not.
func (s *Service) retiredBy(ctx context.Context, h *memrow.Row) (string, error) {
	var op string
	err := s.pool.QueryRow(ctx, heads.WithWriterRefs+`SELECT coalesce((SELECT op FROM loom.memory_revisions
		WHERE org = $1 AND namespace = $2 AND `+heads.IdentityIs+`
		  AND memory_id = $7 AND status = 'superseded'
		  AND seq > coalesce((SELECT max(seq) FROM loom.memory_revisions
			WHERE org = $1 AND namespace = $2 AND `+heads.IdentityIs+`
			  AND memory_id = $7 AND status <> 'superseded'), 0)
		ORDER BY seq LIMIT 1), '')`,
		h.Org, h.Namespace, h.Agent, h.UserID, h.SessionID, h.MemoryKey, h.MemoryID).Scan(&op)
	return op, err
}

// versionsAt reads, for each key, its newest revision at or before at from the
// journal, by IdentityKey. A key with none is absent; one whose revision no longer
// holds its row is present with a nil row.
func (s *Service) versionsAt(ctx context.Context, org, ns string, ids []memrow.Identity, at time.Time) (map[string]*memrow.Row, error) {
	agents, users, sessions, keys := make([]string, len(ids)), make([]string, len(ids)), make([]string, len(ids)), make([]string, len(ids))
	for i, id := range ids {
		agents[i], users[i], sessions[i], keys[i] = id.Agent, id.UserID, id.SessionID, id.MemoryKey
	}
	// The columns hold references (migrations 155, 171, 173): each key's identity is
	// answered as asked, from k.
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (r.agent, r.user_id, r.session_id, r.memory_key)
			k.agent, k.user_id, k.session_id, k.memory_key, `+heads.RowOf("r")+`
		FROM loom.identity_refs($1, $3::text[], $4::text[], $5::text[], $6::text[]) AS k
		JOIN loom.memory_revisions r
		  ON r.agent = k.agent_ref AND r.user_id = k.user_ref AND r.session_id = k.session_ref AND r.memory_key = k.key_ref
		WHERE r.org = $1 AND r.namespace = $2 AND r.version <= $7
		ORDER BY r.agent, r.user_id, r.session_id, r.memory_key, r.version DESC, r.seq DESC`,
		org, ns, agents, users, sessions, keys, at.UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]*memrow.Row{}
	for rows.Next() {
		id := memrow.Identity{Org: org, Namespace: ns}
		var raw []byte
		if err := rows.Scan(&id.Agent, &id.UserID, &id.SessionID, &id.MemoryKey, &raw); err != nil {
			return nil, err
		}
		var row *memrow.Row
		if raw != nil {
			if row, err = heads.Decode(raw); err != nil {
				return nil, err
			}
		}
		out[heads.IdentityKey(id)] = row
	}
	return out, rows.Err()
}

// keyVersionsFrom reads a key's revisions from version on, in version order.
func keyVersionsFrom(ctx context.Context, tx pgx.Tx, id memrow.Identity, version int64) ([]journalVersion, error) {
	rows, err := tx.Query(ctx, heads.WithWriterRefs+`SELECT seq, version, `+heads.Row+` FROM loom.memory_revisions
		WHERE org = $1 AND namespace = $2 AND `+heads.IdentityIs+` AND version >= $7
		ORDER BY version, seq`, id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, version)
	if err != nil {
		return nil, fmt.Errorf("read the key's versions: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (journalVersion, error) {
		var v journalVersion
		var raw []byte
		if err := r.Scan(&v.seq, &v.version, &raw); err != nil {
			return v, fmt.Errorf("read the key's versions: %w", err)
		}
		row, err := heads.Decode(raw)
		if row != nil {
			v.sha = row.ContentSHA256 // plain, as the row holds it opened; the column's is keyed
		}
		v.row = row
		return v, err
	})
}

// revisionsTable names loom.memory_revisions where an erasure counts what it removed.
const revisionsTable = "loom.memory_revisions"

// eraseRevisions deletes the revisions in an erasure's scope below its fence (args as
// erasure.ScopeParams names them), returning the memory ids they held.
func eraseRevisions(ctx context.Context, tx pgx.Tx, args []any) ([]string, error) {
	return collectStrings(tx.Query(ctx, erasure.ScopeParams+` DELETE FROM loom.memory_revisions t USING p WHERE `+pgScope(revisionsTable)+
		` RETURNING t.memory_id::text`, args...))
}

// eraseWithdrawnRevisions deletes the revisions of a promoted copy whose head
// eraseWithdrawnHead deleted, and any data key left of them: the redaction keys kept on
// them, which open the copy's key (migration 175), go with them.
func eraseWithdrawnRevisions(ctx context.Context, tx pgx.Tx, id memrow.Identity) error {
	if _, err := tx.Exec(ctx, heads.WithWriterRefs+`, gone AS (
			DELETE FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND `+heads.IdentityIs+` RETURNING seq)
		DELETE FROM loom.revision_keys k USING gone WHERE k.org = $1 AND k.namespace = $2 AND k.seq = gone.seq`,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey); err != nil {
		return fmt.Errorf("delete the withdrawn copy's revisions: %w", err)
	}
	return nil
}

// destroyScopeKeys deletes the data keys of an erasure's scope (args as
// erasure.ScopeParams names them), after its revisions: a user's keys are those left
// without one. It returns how many.
func destroyScopeKeys(ctx context.Context, tx pgx.Tx, args []any) (int64, error) {
	tag, err := tx.Exec(ctx, erasure.ScopeParams+` DELETE FROM loom.revision_keys t USING p WHERE `+pgScope("loom.revision_keys"), args...)
	return tag.RowsAffected(), err
}

// contentKeysTable names loom.content_keys where an erasure counts what it removed.
const contentKeysTable = "loom.content_keys"

// destroyContentKeys deletes the keys that key the content hashes of an erasure's
// scope (args as erasure.ScopeParams names them), after its revisions: the stored
// hashes of its rows, in dead tuples, the WAL and backups, then link to no value. It
// answers the user references of the scopes whose keys went (the process's cache
// forgets them: contentkey.Cache.Forget).
func destroyContentKeys(ctx context.Context, tx pgx.Tx, args []any) ([]string, error) {
	return collectStrings(tx.Query(ctx, erasure.ScopeParams+` DELETE FROM loom.content_keys t USING p WHERE `+pgScope(contentKeysTable)+
		` RETURNING t.user_id`, args...))
}

// queueNamespacesOfUser queues on b the read of the namespaces of org where user holds
// a revision, into into: the journal's part of the namespaces an erasure of the user
// fences.
func queueNamespacesOfUser(b *pgx.Batch, org, user string, into *[]string) {
	b.Queue(`SELECT DISTINCT namespace FROM loom.memory_revisions WHERE org = $1 AND user_id = ANY((SELECT loom.user_refs($1, $2))::text[])`, org, user).
		Query(func(rows pgx.Rows) error {
			var err error
			*into, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
}

// amendedRevisionSQL reads, for a key ($1–$6) and a version ($7), the version before
// it and the event type of its revision ($8 when the journal holds none).
const amendedRevisionSQL = heads.WithWriterRefs + `SELECT
			(SELECT coalesce(max(version), 0) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2
				AND ` + heads.IdentityIs + ` AND version < $7),
			coalesce((SELECT event_type FROM loom.memory_revisions WHERE org = $1 AND namespace = $2
				AND ` + heads.IdentityIs + ` AND version = $7
				ORDER BY seq LIMIT 1), $8)`

func amendedRevisionArgs(id memrow.Identity, version int64) []any {
	return []any{id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, version, string(events.TypeRevised)}
}

// amendedRevision reads what the amendment of a key's version repeats of its revision:
// the version before it (its prev_version) and its event type (revised when the
// journal holds no revision of the version).
func amendedRevision(ctx context.Context, q heads.Querier, id memrow.Identity, version int64) (prev int64, event string, err error) {
	err = q.QueryRow(ctx, amendedRevisionSQL, amendedRevisionArgs(id, version)...).Scan(&prev, &event)
	return prev, event, err
}

// amendedRevisions is amendedRevision for many heads in one round trip: for each
// head, the version before its version and its revision's event type.
func amendedRevisions(ctx context.Context, q BatchSender, hs []*memrow.Row) (prevs []int64, evs []string, err error) {
	prevs, evs = make([]int64, len(hs)), make([]string, len(hs))
	b := &pgx.Batch{}
	for i, h := range hs {
		b.Queue(amendedRevisionSQL, amendedRevisionArgs(h.Identity, h.Version)...).
			QueryRow(func(r pgx.Row) error { return r.Scan(&prevs[i], &evs[i]) })
	}
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, err
	}
	return prevs, evs, nil
}

// memoryJournal reads the newest 256 revisions of a row's memory (its key and memory
// id), newest first: what the conflict resolver reads to date a value's assertion.
func memoryJournal(ctx context.Context, q heads.Querier, r *memrow.Row) ([]JournalStep, error) {
	// The hash as the row holds it opened (plain): the column's is keyed (migration 101).
	rows, err := q.Query(ctx, heads.WithWriterRefs+`SELECT version, coalesce(`+heads.Row+`->>'content_sha256', ''), status, op FROM loom.memory_revisions
		WHERE org = $1 AND namespace = $2 AND `+heads.IdentityIs+` AND memory_id = $7
		ORDER BY version DESC, seq DESC LIMIT 256`, r.Org, r.Namespace, r.Agent, r.UserID, r.SessionID, r.MemoryKey, r.MemoryID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (JournalStep, error) {
		var j JournalStep
		err := row.Scan(&j.Version, &j.ContentSHA256, &j.Status, &j.Op)
		return j, err
	})
}
