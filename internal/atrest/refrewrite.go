package atrest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// onConflict is what the rewrite does with a row whose new references are taken by a
// row written under them after the swap (a unique index over a reference column).
type onConflict int

const (
	// failOnConflict: the table's unique keys hold no reference (or must not lose a
	// row): a conflict is an error, and the run stops for an operator.
	failOnConflict onConflict = iota
	// deleteOld: the row written under the new references is the newer state of the
	// same thing (a head, a scope's key, a membership, a session's digest or outcome),
	// so the old row goes.
	deleteOld
	// keepOldName: a user's name. The old row's key seals what tokens bound to the
	// user sealed their session under (migration 179), so the name a commit made under
	// the new reference after the swap gives way to it.
	keepOldName
)

// refTable is a table whose columns hold references: cols hold one each, arrays an
// array of them; scope is the erasure ledger's JSON (its user_ref).
type refTable struct {
	table    string
	cols     []string
	arrays   []string
	scope    bool
	conflict onConflict
}

// refTables are the reference columns of docs/architecture.md's map (55 columns in
// 27 tables, and the ledger's scope). loom.search_pages and loom.search_traces are
// not rewritten but deleted (deletedForRotation).
var refTables = []refTable{
	{table: "loom.memory_current", cols: []string{"user_id", "memory_key", "agent", "session_id"}, conflict: deleteOld},
	{table: "loom.memory_revisions", cols: []string{"user_id", "memory_key", "agent", "session_id"}},
	{table: "loom.extraction_requests", cols: []string{"user_id", "read_user_id", "agent", "session_id"}},
	{table: "loom.worker_items", cols: []string{"user_id"}, conflict: deleteOld},
	{table: "loom.entity_aliases", cols: []string{"user_id"}, conflict: deleteOld},
	{table: "loom.memory_evidence", cols: []string{"user_id", "agent", "session_id"}},
	{table: "loom.memory_belief_sources", cols: []string{"user_id"}, conflict: deleteOld},
	{table: "loom.session_summaries", cols: []string{"user_id", "session_id"}, conflict: deleteOld},
	{table: "loom.consolidation_runs", cols: []string{"user_id"}, conflict: deleteOld},
	{table: "loom.decision_records", cols: []string{"user_id", "memory_key", "agent", "session_id"}, conflict: deleteOld},
	{table: "loom.content_keys", cols: []string{"user_id"}, conflict: deleteOld},
	{table: "loom.memory_chunks", cols: []string{"user_id", "agent", "session_id"}},
	{table: "loom.memory_chunk_sources", cols: []string{"user_id"}, conflict: deleteOld},
	{table: "loom.category_links", cols: []string{"user_id", "memory_key", "agent", "session_id"}, conflict: deleteOld},
	{table: "loom.learnings_supporters", cols: []string{"user_id", "agent", "session_id"}, conflict: deleteOld},
	{table: "loom.learnings_queue", cols: []string{"agent"}, conflict: deleteOld},
	{table: "loom.session_outcomes", cols: []string{"user_id", "session_id"}, conflict: deleteOld},
	{table: "loom.read_audit", cols: []string{"user_id"}},
	{table: "loom.knowledge_heads", cols: []string{"user_id"}, conflict: deleteOld},
	{table: "loom.knowledge_revisions", cols: []string{"user_id"}},
	{table: "loom.knowledge_jobs", cols: []string{"user_id"}, conflict: deleteOld},
	{table: "loom.knowledge_datasets", cols: []string{"user_id"}, conflict: deleteOld},
	{table: "loom.shared", cols: []string{"source_user_id", "memory_key", "source_key", "source_agent", "source_session_id"}, conflict: deleteOld},
	{table: "loom.conflict_allowlist", arrays: []string{"user_ids"}, conflict: deleteOld},
	{table: "loom.api_tokens", cols: []string{"read_user_id"}},
	{table: "loom.user_names", cols: []string{"user_ref"}, conflict: keepOldName},
	{table: "loom.erasure_ledger", scope: true},
}

// deletedForRotation are short-lived rows that keep references inside JSON
// (search_pages.pool, search_traces.rows: each identity's user_ref): a parked page
// (ten minutes) and a kept trace are deleted rather than rewritten; a page token of
// the org is then answered as an expired one, and a search run again.
var deletedForRotation = []string{"loom.search_pages", "loom.search_traces"}

// mapped is the SQL of the current reference of column expression c of a row t.
func mapped(c string) string {
	return fmt.Sprintf(`coalesce((SELECT m.new FROM loom.ref_rotation_map m WHERE m.org = t.org AND m.old = %s), %[1]s)`, c)
}

// rewriteSQL is the update of t's rows to their current references, and the
// predicate of a row that holds a retired one.
func (t refTable) rewriteSQL() (set, stale string) {
	var sets, stales []string
	for _, c := range t.cols {
		sets = append(sets, fmt.Sprintf("%s = %s", c, mapped("t."+c)))
		stales = append(stales, fmt.Sprintf("EXISTS (SELECT 1 FROM loom.ref_rotation_map m WHERE m.org = t.org AND m.old = t.%s)", c))
	}
	for _, c := range t.arrays {
		sets = append(sets, fmt.Sprintf(`%[1]s = ARRAY(SELECT %[2]s FROM unnest(t.%[1]s) WITH ORDINALITY AS a(v, i) ORDER BY a.i)`, c, mapped("a.v")))
		stales = append(stales, fmt.Sprintf("EXISTS (SELECT 1 FROM loom.ref_rotation_map m WHERE m.org = t.org AND m.old = ANY(t.%s))", c))
	}
	if t.scope {
		sets = append(sets, `scope = t.scope || jsonb_build_object('user_ref', `+mapped("t.scope->>'user_ref'")+`)`)
		stales = append(stales, `EXISTS (SELECT 1 FROM loom.ref_rotation_map m WHERE m.org = t.org AND m.old = t.scope->>'user_ref')`)
	}
	return strings.Join(sets, ", "), "(" + strings.Join(stales, " OR ") + ")"
}

// rewriteRefs rewrites org's references under the retired key in every table of the
// map, a page range at a time, and deletes its parked pages and kept traces.
func rewriteRefs(ctx context.Context, pool *pgxpool.Pool, org string, r *RefRotation) error {
	for _, table := range deletedForRotation {
		tag, err := pool.Exec(ctx, fmt.Sprintf(`DELETE FROM %s WHERE org = $1`, table), org)
		if err != nil {
			return fmt.Errorf("delete the rows of %s: %w", table, err)
		}
		r.Deleted[table] += tag.RowsAffected()
	}
	for _, t := range refTables {
		set, stale := t.rewriteSQL()
		batch := fmt.Sprintf(`UPDATE %s t SET %s WHERE t.ctid >= $1 AND t.ctid < $2 AND t.org = $3 AND %s`, t.table, set, stale)
		err := walk(ctx, pool, t.table, func(from, to pgtype.TID) error {
			tag, err := pool.Exec(ctx, batch, from, to, org)
			if isUniqueViolation(err) && t.conflict != failOnConflict {
				return rewriteRowByRow(ctx, pool, t, org, from, to, r)
			}
			r.Rewritten[t.table] += tag.RowsAffected()
			return err
		})
		if err != nil {
			return fmt.Errorf("rewrite %s: %w", t.table, err)
		}
	}
	return nil
}

// rewriteRowByRow rewrites a page range whose batch hit a row under the new
// references one row at a time, settling each conflict as the table says.
func rewriteRowByRow(ctx context.Context, pool *pgxpool.Pool, t refTable, org string, from, to pgtype.TID, r *RefRotation) error {
	set, stale := t.rewriteSQL()
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT t.ctid FROM %s t WHERE t.ctid >= $1 AND t.ctid < $2 AND t.org = $3 AND %s`,
		t.table, stale), from, to, org)
	if err != nil {
		return err
	}
	tids, err := pgx.CollectRows(rows, pgx.RowTo[pgtype.TID])
	if err != nil {
		return err
	}
	one := fmt.Sprintf(`UPDATE %s t SET %s WHERE t.ctid = $1 AND %s`, t.table, set, stale)
	for _, tid := range tids {
		tag, err := pool.Exec(ctx, one, tid)
		if err == nil {
			r.Rewritten[t.table] += tag.RowsAffected()
			continue
		}
		if !isUniqueViolation(err) {
			return err
		}
		switch t.conflict {
		case keepOldName:
			if _, err := pool.Exec(ctx, `DELETE FROM loom.user_names n USING loom.user_names o, loom.ref_rotation_map m
				WHERE o.ctid = $1 AND m.org = o.org AND m.old = o.user_ref AND n.org = o.org AND n.user_ref = m.new`, tid); err != nil {
				return fmt.Errorf("drop a name made under the new reference: %w", err)
			}
			tag, err = pool.Exec(ctx, one, tid)
			if err != nil {
				return err
			}
			r.Rewritten[t.table] += tag.RowsAffected()
		default:
			tag, err = pool.Exec(ctx, fmt.Sprintf(`DELETE FROM %s t WHERE t.ctid = $1`, t.table), tid)
			if err != nil {
				return err
			}
			r.Deleted[t.table] += tag.RowsAffected()
		}
	}
	return nil
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// countUnmapped counts, by table, org's rows still naming a reference no live clear
// value mapped (neither a current reference the map made nor empty or '-'): an erased
// user's, or a value the map's sources do not hold. They are left as they are: under
// a key about to be destroyed, such a reference confirms nothing.
func countUnmapped(ctx context.Context, pool *pgxpool.Pool, org string, r *RefRotation) error {
	for _, t := range refTables {
		var odd []string
		for _, c := range t.cols {
			odd = append(odd, unmappedSQL("t."+c))
		}
		for _, c := range t.arrays {
			odd = append(odd, fmt.Sprintf(`EXISTS (SELECT 1 FROM unnest(t.%s) a(v) WHERE %s)`, c, unmappedSQL("a.v")))
		}
		if t.scope {
			odd = append(odd, `(t.scope ? 'user_ref' AND `+unmappedSQL("t.scope->>'user_ref'")+`)`)
		}
		var n int64
		if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s t WHERE t.org = $1 AND (%s)`, t.table, strings.Join(odd, " OR ")),
			org).Scan(&n); err != nil {
			return fmt.Errorf("%s: %w", t.table, err)
		}
		if n > 0 {
			r.Unmapped[t.table] = n
		}
	}
	return nil
}

func unmappedSQL(c string) string {
	return fmt.Sprintf(`(coalesce(%[1]s, '') NOT IN ('', '-') AND NOT EXISTS (SELECT 1 FROM loom.ref_rotation_map m WHERE m.org = t.org AND m.new = %[1]s))`, c)
}
