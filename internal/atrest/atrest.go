// Package atrest brings what Postgres kept from before the at-rest protections up to
// them, in the background, a few pages of a table at a time: every stored data key
// (loom.revision_keys, loom.user_ref_keys, loom.extraction_requests) wrapped under the
// ring's first KEK, whether it was stored raw (before LOOM_KEK) or under a KEK a
// rotation retired; each org's name wrap key replaced by a fresh one under that KEK,
// and the keys it wrapped wrapped again (namewrap.go); and every row of loom.memory_current and loom.memory_revisions
// stored before migration 056, its text still in `row`, sealed as a commit seals it;
// and every row of those tables stored before migration 101, its content hash still
// plain, rehashed as a commit hashes it (keyed under its scope's key in
// loom.content_keys, the plain hash moved into its sealed text); and every row stored
// before migration 171, its key still in `row`, its key moved into its sealed text (a
// row redacted before migration 175, under a redaction key of its own).
//
// The pass walks each table by physical page ranges (a TID range scan), so each batch
// reads a bounded slice whatever the table holds, and every change is a
// compare-and-set (a key still holding the value read, a row still unsealed), so
// passes of several processes, commits and erasures may run beside it. Rows and keys
// written while it runs are written protected already. It runs again at each start
// of a command process; on a table already done it only reads.
package atrest

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
)

// PagesPerBatch is how many heap pages a batch covers (8 KiB each).
const PagesPerBatch = 64

// pause is the rest between batches, so the pass yields to the requests.
const pause = 5 * time.Millisecond

// keyTables are the tables that store data keys, and the column holding each.
var keyTables = []struct{ table, column string }{
	{"loom.revision_keys", "data_key"},
	{"loom.user_ref_keys", "key"},
	{"loom.extraction_requests", "data_key"},
	{"loom.extraction_requests", "who_key"},
	{"loom.knowledge_revisions", "data_key"},
	{"loom.content_keys", "key"},
	{"loom.knowledge_jobs", "data_key"},
	// The keys of a stored answer, a parked page and a kept trace (migration 156):
	// short-lived, but a rotation that drops the old KEK must not strand them.
	{"loom.idempotency", "data_key"},
	{"loom.search_pages", "data_key"},
	{"loom.search_traces", "data_key"},
	// A decision record's key (migration 174).
	{"loom.decision_records", "data_key"},
	// A redaction's key, which seals what its rows keep (migration 175).
	{"loom.memory_revisions", "redaction_key"},
	// The key a token bound to a session and no user seals its session under
	// (migration 179).
	{"loom.api_tokens", "read_session_key"},
}

// rowTables are the tables whose rows seal their text under their revision's key.
var rowTables = []string{"loom.memory_current", "loom.memory_revisions"}

// Counts is what a pass changed.
type Counts struct {
	Wrapped    map[string]int64 // keys wrapped again, by table
	Unopenable map[string]int64 // keys no KEK of the ring opens, by table: left as they are
	Sealed     map[string]int64 // rows whose text was sealed, by table
	Rehashed   map[string]int64 // rows whose content hash was keyed, by table
	KeysSealed map[string]int64 // rows whose key (and user) moved from their JSON into their sealed text, by table
}

// Run runs the pass to its end (or until ctx ends) and logs what it changed. A batch
// that fails is tried again after a pause: the pass is what leaves the stores
// protected, and a store outage ends. With rotate, the user reference keys under a KEK
// that is not the ring's first are replaced first (RotateRefKeys), rather than
// wrapped again by the pass; a rotation that fails is logged and left to the next
// start (the pass then wraps the key again, so the org keeps working).
func Run(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, log *slog.Logger, rotate *RefRotationOptions) error {
	if rotate != nil {
		runRefRotations(ctx, pool, ring, log, *rotate)
	}
	for {
		c, err := Pass(ctx, pool, ring)
		if err == nil {
			if total(c.Wrapped)+total(c.Sealed)+total(c.Rehashed)+total(c.Unopenable)+total(c.KeysSealed) > 0 {
				log.Info("at-rest pass done", "keys_wrapped", c.Wrapped, "rows_sealed", c.Sealed, "rows_rehashed", c.Rehashed,
					"keys_unopenable", c.Unopenable, "row_keys_sealed", c.KeysSealed)
			}
			for t, n := range c.Unopenable {
				if n > 0 {
					log.Warn("at-rest pass: stored data keys no configured LOOM_KEK opens; what they seal does not open either",
						"table", t, "keys", n)
				}
			}
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("at-rest pass: a batch failed; trying again", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Second):
		}
	}
}

// runRefRotations rotates the user reference keys a KEK rotation left under an old KEK
// and logs each.
func runRefRotations(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, log *slog.Logger, opts RefRotationOptions) {
	rs, err := RotateRefKeys(ctx, pool, ring, opts)
	for _, r := range rs {
		log.Info("at-rest pass: user reference key replaced; the KEK the old one was wrapped under may be destroyed once no other key is under it",
			"org", r.Org, "gen", r.Gen, "resumed", r.Resumed, "references_mapped", r.Mapped, "rows_rewritten", r.Rewritten,
			"rows_deleted", r.Deleted, "rows_unmapped", r.Unmapped, "turns_rehashed", r.Rehashed)
	}
	if err != nil && ctx.Err() == nil {
		log.Warn("at-rest pass: a rotation of a user reference key failed; the next start tries again", "err", err)
	}
}

func total(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// Pass walks every table once.
func Pass(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring) (Counts, error) {
	c := Counts{Wrapped: map[string]int64{}, Unopenable: map[string]int64{}, Sealed: map[string]int64{}, Rehashed: map[string]int64{},
		KeysSealed: map[string]int64{}}
	for _, t := range keyTables {
		err := walk(ctx, pool, t.table, func(from, to pgtype.TID) error {
			w, u, err := wrapKeys(ctx, pool, ring, t.table, t.column, from, to)
			c.Wrapped[t.table] += w
			c.Unopenable[t.table] += u
			return err
		})
		if err != nil {
			return c, fmt.Errorf("wrap the keys of %s: %w", t.table, err)
		}
	}
	if err := renewNameWraps(ctx, pool, ring, c); err != nil {
		return c, err
	}
	// One walk a table for the steps on a row's own text, in their order on each page
	// range: its text sealed, then its plain hash moved into its sealed text, then a key
	// (and a user, agent or session) its JSON still holds (stored before migrations 171,
	// 173) moved there too.
	for _, table := range rowTables {
		err := walk(ctx, pool, table, func(from, to pgtype.TID) error {
			n, err := sealRows(ctx, pool, table, from, to)
			c.Sealed[table] += n
			if err != nil {
				return fmt.Errorf("seal the rows: %w", err)
			}
			if n, err = rehashRows(ctx, pool, ring, table, from, to); err != nil {
				return fmt.Errorf("rehash the rows: %w", err)
			}
			c.Rehashed[table] += n
			n, err = sealKeys(ctx, pool, table, from, to)
			c.KeysSealed[table] += n
			if err != nil {
				return fmt.Errorf("seal the rows' keys: %w", err)
			}
			return nil
		})
		if err != nil {
			return c, fmt.Errorf("%s: %w", table, err)
		}
	}
	// And a row redacted before migration 175 (its JSON holds its key, its sealed text
	// is gone) has it sealed under a redaction key of its own: the revisions first,
	// whose keys the heads at their seqs are sealed under.
	for _, table := range []string{"loom.memory_revisions", "loom.memory_current"} {
		err := walk(ctx, pool, table, func(from, to pgtype.TID) error {
			n, err := sealRedacted(ctx, pool, ring, table, from, to)
			c.KeysSealed[table] += n
			return err
		})
		if err != nil {
			return c, fmt.Errorf("seal the keys of the redacted rows of %s: %w", table, err)
		}
	}
	return c, nil
}

// walk calls batch for each range of PagesPerBatch pages of table, up to its size
// read again at each range (a table that grows is walked to its new end).
func walk(ctx context.Context, pool *pgxpool.Pool, table string, batch func(from, to pgtype.TID) error) error {
	for block := int64(0); ; block += PagesPerBatch {
		var blocks int64
		if err := pool.QueryRow(ctx, `SELECT pg_relation_size($1::regclass) / current_setting('block_size')::bigint`, table).
			Scan(&blocks); err != nil {
			return err
		}
		if block >= blocks {
			return nil
		}
		from := pgtype.TID{BlockNumber: uint32(block), Valid: true}
		to := pgtype.TID{BlockNumber: uint32(block + PagesPerBatch), Valid: true}
		if err := batch(from, to); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

// wrapKeys wraps under the ring's first KEK the keys of a page range that are raw or
// under another KEK; a key none opens is counted and left.
func wrapKeys(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, table, column string, from, to pgtype.TID) (wrapped, unopenable int64, err error) {
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT ctid, %[2]s FROM %[1]s
		WHERE ctid >= $1 AND ctid < $2 AND %[2]s IS NOT NULL
		  AND NOT (octet_length(%[2]s) = %[3]d AND substring(%[2]s FROM 2 FOR 8) = $3)`, table, column, kek.WrappedSize),
		from, to, ring.CurrentID())
	if err != nil {
		return 0, 0, err
	}
	type found struct {
		tid pgtype.TID
		key []byte
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (found, error) {
		var f found
		return f, r.Scan(&f.tid, &f.key)
	})
	if err != nil || len(keys) == 0 {
		return 0, 0, err
	}
	var tids []pgtype.TID
	var olds, news [][]byte
	for _, f := range keys {
		plain, err := ring.Unwrap(f.key)
		if err != nil {
			unopenable++
			continue
		}
		w, err := ring.Wrap(plain)
		if err != nil {
			return 0, unopenable, err
		}
		tids, olds, news = append(tids, f.tid), append(olds, f.key), append(news, w)
	}
	if len(tids) == 0 {
		return 0, unopenable, nil
	}
	// Only a key that still holds what was read: another process's pass may have
	// wrapped it meanwhile, an erasure deleted it.
	tag, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %[1]s t SET %[2]s = v.new
		FROM unnest($1::tid[], $2::bytea[], $3::bytea[]) AS v(tid, old, new)
		WHERE t.ctid = v.tid AND t.%[2]s = v.old`, table, column), tids, olds, news)
	if err != nil {
		return 0, unopenable, err
	}
	return tag.RowsAffected(), unopenable, nil
}

// sealRows seals the text of the rows of a page range stored before migration 056, as
// heads.AtRest does (pgcrypto's AES-256-CBC under HMAC-SHA256(data key, "loom.row"),
// as loom.opened_row opens it), in Postgres, where the row is. A row whose key is
// gone (redacted) holds no text and is left. A row a commit replaced meanwhile is
// sealed already and no longer matches.
func sealRows(ctx context.Context, pool *pgxpool.Pool, table string, from, to pgtype.TID) (int64, error) {
	// The range's unsealed rows first, in the range alone: once every row is sealed
	// this is all a batch reads (a join to the keys here would be planned as a scan
	// of all of loom.revision_keys at each batch).
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT ctid FROM %s WHERE ctid >= $1 AND ctid < $2 AND sealed IS NULL AND row ?| $3::text[]`, table),
		from, to, heads.TextFields)
	if err != nil {
		return 0, err
	}
	tids, err := pgx.CollectRows(rows, pgx.RowTo[pgtype.TID])
	if err != nil || len(tids) == 0 {
		return 0, err
	}
	tag, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %s t SET row = t.row - $2::text[],
			sealed = encrypt(convert_to((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(t.row) e
				WHERE e.key = ANY($2::text[]))::text, 'UTF8'), hmac('loom.row'::bytea, loom.unwrapped_key(k.data_key), 'sha256'), 'aes')
		FROM unnest($1::tid[]) AS b(tid), loom.revision_keys k
		WHERE t.ctid = b.tid AND t.sealed IS NULL AND t.row ?| $2::text[]
		  AND k.org = t.org AND k.namespace = t.namespace AND k.seq = t.seq`, table), tids, heads.TextFields)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// rehashRows keys the content hash of the rows of a page range stored before migration
// 101 (their row's JSON holds the plain hash) as a commit keys it: the column takes
// HMAC-SHA256 of the plain hash under the scope's key (loom.content_hash), made here if
// the scope has none, and the plain hash moves from the row's JSON into its sealed text
// (sealed again under the same derived key, AES-256-CBC with its zero IV: what the old
// ciphertext, left in a dead tuple, and the new one show together is which leading
// 16-byte blocks their plaintexts share, the row's text with and without its hash). A
// row whose data key is gone (redacted) keeps no hash. A row a commit replaced
// meanwhile no longer matches.
func rehashRows(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, table string, from, to pgtype.TID) (int64, error) {
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT ctid FROM %s WHERE ctid >= $1 AND ctid < $2 AND row->>'content_sha256' <> ''`, table),
		from, to)
	if err != nil {
		return 0, err
	}
	tids, err := pgx.CollectRows(rows, pgx.RowTo[pgtype.TID])
	if err != nil || len(tids) == 0 {
		return 0, err
	}
	if err := makeContentKeys(ctx, pool, ring, table, tids); err != nil {
		return 0, err
	}
	tag, err := pool.Exec(ctx, fmt.Sprintf(`WITH src AS (
			SELECT t.ctid AS tid, t.row->>'content_sha256' AS sha,
				loom.content_hash(t.org, t.namespace, t.user_id, t.row->>'content_sha256') AS keyed,
				(SELECT hmac('loom.row'::bytea, loom.unwrapped_key(k.data_key), 'sha256') FROM loom.revision_keys k
					WHERE k.org = t.org AND k.namespace = t.namespace AND k.seq = t.seq) AS row_key
			FROM %[1]s t WHERE t.ctid = ANY($1::tid[]) AND t.row->>'content_sha256' <> '')
		UPDATE %[1]s t SET content_sha256 = src.keyed, row = jsonb_set(t.row, '{content_sha256}', '""'),
			sealed = CASE WHEN t.sealed IS NULL OR src.row_key IS NULL THEN t.sealed
				ELSE encrypt(convert_to((convert_from(decrypt(t.sealed, src.row_key, 'aes'), 'UTF8')::jsonb
					|| jsonb_build_object('content_sha256', src.sha))::text, 'UTF8'), src.row_key, 'aes') END
		FROM src WHERE t.ctid = src.tid AND t.row->>'content_sha256' = src.sha AND src.keyed IS NOT NULL`, table), tids)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// sealKeys moves the key of the rows of a page range stored before migration 171
// (their `row` JSON holds it, their sealed text does not) into their sealed text, as
// heads.AtRest seals it since, and blanks it in the JSON; and the user with it, where
// the JSON still names one (migration 155 blanked them, but not in a row it could
// not reach). The text is sealed again under the same derived key (AES-256-CBC with
// its zero IV: the old ciphertext, left in a dead tuple, and the new one show which
// leading 16-byte blocks their plaintexts share, as rehashRows' do). A row whose data
// key is gone (redacted) has no sealed text to hold it and is left. A row a commit
// replaced meanwhile no longer matches.
func sealKeys(ctx context.Context, pool *pgxpool.Pool, table string, from, to pgtype.TID) (int64, error) {
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT ctid FROM %s WHERE ctid >= $1 AND ctid < $2 AND sealed IS NOT NULL
		AND (row->>'memory_key' <> '' OR row->>'user_id' NOT IN ('', '-') OR row->>'agent' NOT IN ('', '-')
			OR row->>'session_id' NOT IN ('', '-'))`, table), from, to)
	if err != nil {
		return 0, err
	}
	tids, err := pgx.CollectRows(rows, pgx.RowTo[pgtype.TID])
	if err != nil || len(tids) == 0 {
		return 0, err
	}
	// The sealed text's own fields win: a key, user, agent or session it holds is the row's.
	tag, err := pool.Exec(ctx, fmt.Sprintf(`WITH src AS (
			SELECT t.ctid AS tid, t.sealed AS old, jsonb_strip_nulls(jsonb_build_object(
					'memory_key', nullif(t.row->>'memory_key', ''),
					'user_id', CASE WHEN t.row->>'user_id' NOT IN ('', '-') THEN t.row->>'user_id' END,
					'agent', CASE WHEN t.row->>'agent' NOT IN ('', '-') THEN t.row->>'agent' END,
					'session_id', CASE WHEN t.row->>'session_id' NOT IN ('', '-') THEN t.row->>'session_id' END)) AS moved,
				(SELECT hmac('loom.row'::bytea, loom.unwrapped_key(k.data_key), 'sha256') FROM loom.revision_keys k
					WHERE k.org = t.org AND k.namespace = t.namespace AND k.seq = t.seq) AS row_key
			FROM %[1]s t WHERE t.ctid = ANY($1::tid[]))
		UPDATE %[1]s t SET
			sealed = encrypt(convert_to((src.moved || convert_from(decrypt(t.sealed, src.row_key, 'aes'), 'UTF8')::jsonb)::text, 'UTF8'),
				src.row_key, 'aes'),
			row = t.row || `+blankedIdentity+`
		FROM src WHERE t.ctid = src.tid AND t.sealed = src.old AND src.row_key IS NOT NULL`, table), tids)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// sealRedacted seals the identity (key, user, agent, session) of the rows of a page range a redaction scrubbed
// before migration 175 (their JSON holds the key, their sealed text and revision key
// are gone) as a redaction seals them since (heads.Redacted), and blanks them in the
// JSON: a revision under a fresh key (kek.NewKey) it keeps as its redaction_key, a
// head under its seq's revision's (left until that revision has one). The user is
// the JSON's or, as loom.opened_row names it, its name's. A row a commit or a
// redaction changed meanwhile no longer matches.
func sealRedacted(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, table string, from, to pgtype.TID) (int64, error) {
	revisionKey := "NULL::bytea"
	if table == "loom.memory_current" {
		revisionKey = `(SELECT v.redaction_key FROM loom.memory_revisions v WHERE v.org = t.org AND v.namespace = t.namespace AND v.seq = t.seq)`
	}
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT t.ctid, t.row->>'memory_key',
			coalesce(nullif(t.row->>'user_id', ''), CASE WHEN t.user_id IN ('', '-') THEN t.user_id ELSE loom.user_name(t.org, t.user_id) END, ''),
			coalesce(t.row->>'agent', ''), coalesce(t.row->>'session_id', ''),
			%[2]s
		FROM %[1]s t WHERE t.ctid >= $1 AND t.ctid < $2 AND t.sealed IS NULL AND t.row->>'memory_key' <> ''
		  AND coalesce((t.row->>'redacted')::boolean, false)
		  AND NOT EXISTS (SELECT 1 FROM loom.revision_keys k WHERE k.org = t.org AND k.namespace = t.namespace AND k.seq = t.seq)`,
		table, revisionKey), from, to)
	if err != nil {
		return 0, err
	}
	type found struct {
		tid                       pgtype.TID
		key, user, agent, session string
		stored                    []byte
	}
	redacted, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (found, error) {
		var f found
		return f, r.Scan(&f.tid, &f.key, &f.user, &f.agent, &f.session, &f.stored)
	})
	if err != nil || len(redacted) == 0 {
		return 0, err
	}
	var tids []pgtype.TID
	var keys []string
	var sealed, stored [][]byte
	for _, f := range redacted {
		var key []byte
		if table == "loom.memory_current" {
			if f.stored == nil {
				continue
			}
			if key, err = kek.OpenKey(ring, f.stored); err != nil {
				return 0, fmt.Errorf("open a redaction key: %w", err)
			}
		} else if key, f.stored, err = kek.NewKey(ring); err != nil {
			return 0, err
		}
		text, err := heads.Redacted(memrow.Identity{MemoryKey: f.key, UserID: f.user, Agent: f.agent, SessionID: f.session}, key)
		if err != nil {
			return 0, err
		}
		tids, keys, sealed, stored = append(tids, f.tid), append(keys, f.key), append(sealed, text), append(stored, f.stored)
	}
	if len(tids) == 0 {
		return 0, nil
	}
	set := ""
	if table == "loom.memory_revisions" {
		set = ", redaction_key = v.stored"
	}
	tag, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %[1]s t SET sealed = v.sealed%[2]s, row = t.row || `+blankedIdentity+`
		FROM unnest($1::tid[], $2::text[], $3::bytea[], $4::bytea[]) AS v(tid, key, sealed, stored)
		WHERE t.ctid = v.tid AND t.sealed IS NULL AND t.row->>'memory_key' = v.key`, table, set), tids, keys, sealed, stored)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// makeContentKeys makes the content hash key of each scope (org, namespace, user) of
// the rows tids of table that has none, wrapped under the ring's first KEK, as a
// commit makes it.
func makeContentKeys(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, table string, tids []pgtype.TID) error {
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT DISTINCT t.org, t.namespace, t.user_id FROM %s t
		WHERE t.ctid = ANY($1::tid[]) AND NOT EXISTS (SELECT 1 FROM loom.content_keys k
			WHERE k.org = t.org AND k.namespace = t.namespace AND k.user_id = t.user_id)`, table), tids)
	if err != nil {
		return err
	}
	type scope struct{ org, namespace, user string }
	scopes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (scope, error) {
		var s scope
		return s, r.Scan(&s.org, &s.namespace, &s.user)
	})
	if err != nil || len(scopes) == 0 {
		return err
	}
	var orgs, nss, users []string
	var keys [][]byte
	for _, s := range scopes {
		plain := make([]byte, kek.KeySize)
		if _, err := rand.Read(plain); err != nil {
			return fmt.Errorf("make a content hash key: %w", err)
		}
		w, err := ring.Wrap(plain)
		if err != nil {
			return err
		}
		orgs, nss, users, keys = append(orgs, s.org), append(nss, s.namespace), append(users, s.user), append(keys, w)
	}
	_, err = pool.Exec(ctx, `INSERT INTO loom.content_keys (org, namespace, user_id, key)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[]) ON CONFLICT DO NOTHING`, orgs, nss, users, keys)
	return err
}

// blankedIdentity blanks the key, and a user, agent or session other than "-", of a
// memory row's JSON (t), once its sealed text holds them.
const blankedIdentity = `jsonb_build_object('memory_key', '')
	|| CASE WHEN t.row->>'user_id' NOT IN ('', '-') THEN jsonb_build_object('user_id', '') ELSE '{}' END
	|| CASE WHEN t.row->>'agent' NOT IN ('', '-') THEN jsonb_build_object('agent', '') ELSE '{}' END
	|| CASE WHEN t.row->>'session_id' NOT IN ('', '-') THEN jsonb_build_object('session_id', '') ELSE '{}' END`
