package command

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomplane/loom/internal/erasure"
)

// The erasure's deletes of the tables command holds no store file of: the query
// side's parked pages and kept traces (query owns them; command does not import query)
// internal/extractqueue's deferred requests, and internal/evidence's turns and belief
// sources. They sit in one file because they are
// one step of the saga: the same scope predicate (internal/erasure's registry) over
// each table, in the one transaction that fences the namespace (erasure_postgres.go).
// The residue census's count is here too: one statement over every counted table of
// the registry (erasure_census.go).
// The saga's deletes of the tables that have a store file are in it: current_store.go,
// revisions_store.go, entity_aliases_store.go, internal/idempotency (the fence of the
// answers), erased_store.go and erasure_ledger_store.go.

// userNamesTable holds the users' sealed names (migration 155): deleting one changes
// what the tokens bound to the user authenticate as (erasure_postgres.go).
const userNamesTable = "loom.user_names"

// queueEraseDerived queues the deletes of the parked pages and kept search traces that
// name the scope's keys, of the deferred extractions with their sealed transcripts
// and keys (a request not yet extracted never is, and the topic's copy of it no longer
// opens), and of the conversation's record (internal/evidence's tables): the turns
// with the only copies of their data keys, and the links to them. counts holds each table's count once the batch is sent.
func queueEraseDerived(b *pgx.Batch, args []any, counts map[string]int64) {
	for _, table := range []string{"loom.search_pages", "loom.search_traces", "loom.extraction_requests",
		// A namespace's knowledge documents: the heads with their sealed text, and the
		// revisions' keys, so the topic's copies no longer open (knowledge/command owns
		// the writes; the scope comes from internal/erasure's registry).
		// The dataset catalog's approvals of those documents (migration 132).
		"loom.knowledge_datasets",
		"loom.knowledge_heads", "loom.knowledge_revisions",
		// knowledge.ingest's jobs submitted before the fence, files first (their scope
		// reads the jobs).
		"loom.knowledge_job_files", "loom.knowledge_jobs",
		"loom.memory_belief_sources", "loom.memory_evidence",
		// The session digests of the scope's conversations (internal/evidence), with the
		// only copies of their data keys.
		"loom.session_summaries",
		// The reflection_distill pass's outcome labels of the scope's sessions.
		"loom.session_outcomes",
		// The verbatim chunks cut from the scope's turns, with the only copies of their
		// data keys, and their lineage.
		"loom.memory_chunk_sources", "loom.memory_chunks",
		// The entity communities of the namespace (internal/communities): every one goes,
		// the next pass recomputes them from the graph that is left.
		"loom.entity_communities",
		// The learnings queue (internal/learnings): the scope's supporters, then the
		// candidates left with none (a namespace's: all of them).
		"loom.learnings_supporters", "loom.learnings_queue",
		// The user's sealed name, once nothing of the user's is left (migration 155).
		userNamesTable} {
		b.Queue(scopedDelete(table), args...).
			Exec(func(tag pgconn.CommandTag) error {
				counts[table] = tag.RowsAffected()
				return nil
			})
	}
}

// scopedDelete deletes a counted table's rows in an erasure's scope (args as
// erasure.ScopeParams names them).
func scopedDelete(table string) string {
	return erasure.ScopeParams + ` DELETE FROM ` + table + ` t USING p WHERE ` + pgScope(table)
}

// eraseUserName deletes the user's sealed name when nothing of the user's is left in
// the org: what a user's erasure across the org does when no namespace held the user
// (a user known only from a token bound to them), so the tokens bound to the user
// stop answering as the user.
func eraseUserName(ctx context.Context, tx pgx.Tx, org, user, id string) (int64, error) {
	tag, err := tx.Exec(ctx, scopedDelete(userNamesTable), org, "", user, int64(0), id)
	if err != nil {
		return 0, fmt.Errorf("delete the user's name: %w", err)
	}
	return tag.RowsAffected(), nil
}

// queueKnowledgeNamespacesOfUser queues the read of the namespaces where the user's
// knowledge documents or ingestion jobs are (migration 157; a head's user is its
// revisions', so the revisions find every head), for a user's erasure across the org.
// Statements over the knowledge tables that erase are the erasure's, here, by the
// registry's scopes; knowledge/store owns the plane's own.
func queueKnowledgeNamespacesOfUser(b *pgx.Batch, org, user string, into *[]string) {
	b.Queue(`SELECT namespace FROM loom.knowledge_revisions WHERE org = $1 AND user_id = ANY((SELECT loom.user_refs($1, $2))::text[])
		UNION SELECT namespace FROM loom.knowledge_jobs WHERE org = $1 AND user_id = ANY((SELECT loom.user_refs($1, $2))::text[])`, org, user).
		Query(func(rows pgx.Rows) error {
			var err error
			*into, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
}

// countResidue counts the rows of table in an erasure's scope (scope its predicate,
// args as erasure.ScopeParams names them).
func (s *Service) countResidue(ctx context.Context, table, scope string, args []any) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, erasure.ScopeParams+` SELECT count(*) FROM `+table+` t, p WHERE `+scope, args...).Scan(&n)
	return n, err
}

// pgScopes maps each counted Postgres table to its scope predicate.
func pgScopes() map[string]string {
	out := map[string]string{}
	for _, t := range erasure.Tables() {
		if t.Store == erasure.Postgres && t.Class == erasure.Counted {
			out[t.Name] = t.Scope
		}
	}
	return out
}

// pgScope is a counted Postgres table's scope predicate.
func pgScope(table string) string { return pgScopes()[table] }

// collectStrings reads a result whose one column is text.
func collectStrings(rows pgx.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
