// Package erasure holds the rules an erasure and a redaction share between the write
// side (the saga and its residue census) and the projector (which applies them to
// ClickHouse): the registry of every table of both stores, classified by whether it
// can hold memory content in an erasure's scope, the scope predicates, and the
// ClickHouse mutations that erase or scrub.
package erasure

import (
	"strings"

	"github.com/loomplane/loom/internal/tableset"
)

// Class says what an erasure does with a table.
type Class string

const (
	// Counted tables can hold the scope's content: the saga clears them and the
	// residue census counts them; any count re-opens the step that owns the table.
	Counted Class = "counted"
	// StepOnly tables a step clears but the census does not count (a derived cache
	// that refills from elsewhere, say). None of Loom's tables is one today.
	StepOnly Class = "step_only"
	// NoMemoryContent tables hold no memory content in any scope; Why says why.
	NoMemoryContent Class = "no_memory_content"
)

// Stores a table lives in.
const (
	Postgres   = "pg"
	ClickHouse = "ch"
)

// Table is one table of the registry.
type Table struct {
	Store string // Postgres or ClickHouse
	Name  string // schema-qualified: loom.memory_current
	Class Class
	Why   string
	// Scope is a counted Postgres table's scope predicate over the table (alias t)
	// and the erasure's parameters (alias p: org, ns, user_id, fence, erasure; an
	// empty user_id means the whole namespace): the rows the Postgres step removes
	// and the census counts. ClickHouse tables take theirs from Fence.
	Scope string
}

// Key names the table in a census: "pg:loom.memory_current".
func (t Table) Key() string { return t.Store + ":" + t.Name }

// Tables is the registry: every table of both stores, each classified. A test fails
// on a table either store holds that is not listed here.
func Tables() []Table {
	return append(append(postgresContent(), postgresNoContent()...), clickhouseTables()...)
}

// postgresContent are the Postgres tables that hold a scope's memory content or name
// its memories: an erasure deletes the scope's rows and the census counts them.
func postgresContent() []Table {
	return append([]Table{
		{Store: Postgres, Name: "loom.memory_current", Class: Counted, Why: "the heads: complete memory rows", Scope: rowScope},
		{Store: Postgres, Name: "loom.memory_revisions", Class: Counted, Why: "the journal: every committed row", Scope: rowScope},
		{Store: Postgres, Name: "loom.revision_keys", Class: Counted, Why: "the data keys that open the scope's records on the topic",
			// A user's keys are those whose revision the step removed: a key below the
			// fence with no revision left.
			Scope: `t.org = p.org AND t.namespace = p.ns AND t.seq < p.fence AND (p.user_id = '' OR NOT EXISTS (
				SELECT 1 FROM loom.memory_revisions r WHERE r.org = t.org AND r.namespace = t.namespace AND r.seq = t.seq))`},
		{Store: Postgres, Name: "loom.content_keys", Class: Counted, Why: "the keys the scope's stored content hashes are keyed under (migration 101)",
			// A scope's key goes once the step removed its revisions; a key whose scope
			// still holds a revision (written at or after the fence) keys that row's hash.
			Scope: `t.org = p.org AND t.namespace = p.ns AND (p.user_id = '' OR t.user_id = ANY(p.user_refs)) AND NOT EXISTS (
				SELECT 1 FROM loom.memory_revisions r WHERE r.org = t.org AND r.namespace = t.namespace AND r.user_id = t.user_id)`},
		{Store: Postgres, Name: "loom.outbox", Class: Counted, Why: "revision records not yet published (sealed, but the scope's own)",
			// Only records that carry a revision: another erasure's record is not the scope's.
			// The CASE reads a value only once the row is known to be the namespace's. A
			// record names its user by user_ref (envelope version 2: HMAC-SHA256 of the id
			// under the org's key, as events.UserRef computes it) or, written before, by
			// user_id (p.user_name).
			// A knowledge document's record names its user (if any) by user_ref: a
			// namespace's erasure withdraws every one, a user's those naming the user.
			Scope: `CASE WHEN t.org = p.org AND t.namespace = p.ns AND t.seq < p.fence
				THEN ((convert_from(t.value, 'UTF8')::jsonb -> 'revision') IS NOT NULL
					AND (p.user_id = '' OR convert_from(t.value, 'UTF8')::jsonb #>> '{revision,user_id}' = p.user_name
						OR convert_from(t.value, 'UTF8')::jsonb #>> '{revision,user_ref}' = ANY(p.user_refs)))
					OR ((convert_from(t.value, 'UTF8')::jsonb -> 'document') IS NOT NULL
						AND (p.user_id = '' OR convert_from(t.value, 'UTF8')::jsonb #>> '{document,user_ref}' = ANY(p.user_refs)))
				ELSE false END`},
		{Store: Postgres, Name: "loom.idempotency", Class: Counted, Why: "stored answers and committed revisions name the scope's memories and documents",
			// The answers that name a memory or a knowledge document this erasure removed
			// (its evidence). An answer and its revisions are sealed under the claim's key
			// (migration 156), names keeping the ids they hold; one stored before is plain.
			Scope: `t.org = p.org AND t.state <> 'erased' AND (EXISTS (SELECT 1 FROM loom.erased_memories e
				WHERE e.org = p.org AND e.namespace = p.ns AND e.erasure_id = p.erasure
				  AND (t.revisions @> jsonb_build_array(jsonb_build_object('memory_id', e.memory_id::text))
				       OR strpos(concat_ws(' ', t.names, t.answer::text), e.memory_id::text) > 0))
				OR EXISTS (SELECT 1 FROM loom.erased_documents d
				WHERE d.org = p.org AND d.namespace = p.ns AND d.erasure_id = p.erasure AND d.doc_id IS NOT NULL
				  AND strpos(concat_ws(' ', t.names, t.answer::text), d.doc_id::text) > 0))`},
		{Store: Postgres, Name: "loom.search_pages", Class: Counted, Why: "parked search pools name the scope's keys",
			// The pool column names each scope's user by reference (migration 156).
			Scope: `t.org = p.org AND EXISTS (SELECT 1 FROM unnest(CASE WHEN p.user_name <> '' THEN p.user_refs ELSE ARRAY[NULL::text] END) AS r(ref)
				WHERE t.pool @> jsonb_build_array(jsonb_build_object('id',
				jsonb_strip_nulls(jsonb_build_object('namespace', p.ns, 'user_ref', r.ref)))))`},
		{Store: Postgres, Name: "loom.entity_aliases", Class: Counted, Why: "entity spellings the entity extractor read in the scope's rows", Scope: rowScope},
		{Store: Postgres, Name: "loom.entity_communities", Class: Counted,
			Why:   "the entity_communities pass's clusters name the namespace's entities; any erasure in the namespace drops them all, and the next pass recomputes them from what is left",
			Scope: `t.org = p.org AND t.namespace = p.ns`},
		{Store: Postgres, Name: "loom.session_summaries", Class: Counted,
			Why: "session digests: a model's digest of a user's session (sealed) and the data key that opens it", Scope: rowScope},
		{Store: Postgres, Name: "loom.session_outcomes", Class: Counted,
			Why: "the reflection_distill pass's outcome label of a user's session (no text; the reflections are memory rows)", Scope: rowScope},
		{Store: Postgres, Name: "loom.shared", Class: Counted, Why: "promotions: the keys, identities and versions promoted rows came from",
			// A namespace's promotions go with it; a user's, matched by provenance, too.
			// A user erasure withdraws the promoted rows (whose user is
			// memrow.SharedUser) before its saga, and their records with them
			// (command/cross_promote.go): each row's versions redacted, then its rows
			// deleted from both stores (the redaction keys on its revisions with them;
			// in ClickHouse on its redactions' records, Redaction.Withdrawn), as the
			// saga deletes its scope's. The record is forgotten last, so the census
			// finds any withdrawal left unfinished.
			Scope: `t.org = p.org AND t.namespace = p.ns AND (p.user_id = '' OR t.source_user_id = ANY(p.user_refs)) AND t.seq < p.fence`},
		{Store: Postgres, Name: "loom.decision_records", Class: Counted, Why: "decision records: who decided a key and what it superseded", Scope: rowScope},
		{Store: Postgres, Name: "loom.category_links", Class: Counted, Why: "category links: the keys and the category names linked or rescinded", Scope: rowScope},
		{Store: Postgres, Name: "loom.conflict_allowlist", Class: Counted,
			Why: "allowlisted pairs: the memory ids and users of the scope's rows a writer said are not in conflict",
			// A pair goes with either of its rows' users, and with its namespace.
			Scope: `t.org = p.org AND t.namespace = p.ns AND (p.user_id = '' OR t.user_ids && p.user_refs) AND t.seq < p.fence`},
		{Store: Postgres, Name: "loom.search_traces", Class: Counted, Why: "kept search traces name the scope's keys and scores",
			// A namespace's erasure takes every trace over the namespace, rows or not. A
			// trace's rows name their users by reference (migration 156; by id before).
			// A user's erasure takes the traces of the user's searches of the namespace too.
			Scope: `t.org = p.org AND ((p.user_id = '' AND p.ns = ANY(t.namespaces))
				OR (p.user_name <> '' AND t.user_id = ANY(p.user_refs) AND p.ns = ANY(t.namespaces))
				OR EXISTS (SELECT 1 FROM unnest(p.user_refs) AS r(ref)
					WHERE t.rows @> jsonb_build_array(jsonb_build_object('id', jsonb_build_object('namespace', p.ns, 'user_ref', r.ref))))
				OR t.rows @> jsonb_build_array(jsonb_build_object('id',
				jsonb_strip_nulls(jsonb_build_object('namespace', p.ns, 'user_id', nullif(p.user_name, ''))))))`},
		{Store: Postgres, Name: "loom.extraction_requests", Class: Counted,
			Why: "deferred extractions: the sealed transcript and its data key until done, then the facts' keys",
			// Requests committed below the fence: the namespace's generation, read under its
			// row lock, is what a request recorded when it committed.
			Scope: `t.org = p.org AND t.namespace = p.ns AND (p.user_id = '' OR t.user_id = ANY(p.user_refs)) AND t.generation < p.fence`},
		{Store: Postgres, Name: "loom.memory_evidence", Class: Counted,
			Why:   "the conversation's turns (memory.observe, memory.set_from_messages' inputs): sealed text and the data key that opens it and the topic's copy",
			Scope: rowScope},
		{Store: Postgres, Name: "loom.memory_belief_sources", Class: Counted,
			Why: "which turns each memory version was drawn from: memory ids and turn ids of the scope's conversations", Scope: rowScope},
		{Store: Postgres, Name: "loom.memory_chunks", Class: Counted,
			Why:   "verbatim chunks cut from the conversation's turns: sealed text and the data key that opens it",
			Scope: rowScope},
		{Store: Postgres, Name: "loom.memory_chunk_sources", Class: Counted,
			Why: "which turns each verbatim chunk was cut from: chunk ids and turn ids of the scope's conversations", Scope: rowScope},
	}, append(append(knowledgeTables(), learningsTables()...), userNames)...)
}

// knowledgeTables are the knowledge plane's tables (knowledge/, migrations 070, 110,
// 132, 157): a namespace's erasure takes every row, a user's those of the documents
// and jobs written for the user (documentScope).
func knowledgeTables() []Table {
	return []Table{
		{Store: Postgres, Name: "loom.knowledge_heads", Class: Counted,
			Why: "the head of every knowledge source: its sealed text, title and outline (a user's documents go with the user, the namespace's with the namespace)", Scope: documentScope},
		{Store: Postgres, Name: "loom.knowledge_revisions", Class: Counted,
			Why: "the data keys that open the scope's knowledge records on the topic and seal its heads", Scope: documentScope},
		{Store: Postgres, Name: "loom.knowledge_datasets", Class: Counted,
			Why: "the dataset catalog: which tables of the scope's documents were approved, at which version, by whom, with their column names", Scope: documentScope},
		{Store: Postgres, Name: "loom.knowledge_job_files", Class: Counted,
			Why: "knowledge.ingest's files: source URIs and, until each is written, its body sealed under the job's key",
			Scope: `t.org = p.org AND t.namespace = p.ns AND EXISTS (SELECT 1 FROM loom.knowledge_jobs j
				WHERE j.org = t.org AND j.namespace = t.namespace AND j.ingestion_id = t.ingestion_id AND j.gen < p.fence
				  AND (p.user_id = '' OR j.user_id = ANY(p.user_refs)))`},
		{Store: Postgres, Name: "loom.knowledge_jobs", Class: Counted,
			Why:   "knowledge.ingest's jobs: their accounts and the data keys that seal their files (a user's go with the user, as its documents)",
			Scope: `t.org = p.org AND t.namespace = p.ns AND (p.user_id = '' OR t.user_id = ANY(p.user_refs)) AND t.gen < p.fence`},
	}
}

// userNames is loom.user_names (migration 155): each user's id, sealed, for the reads
// that answer a user from a column holding the reference. A user's name goes with the
// last of the user's rows an erasure removes (the step deletes it after every other
// table of the namespace): while a journal row, a turn, a queued extraction, a
// supporter, a digest or a chunk names the user, in any namespace, its reads still
// answer the id.
var userNames = Table{Store: Postgres, Name: "loom.user_names", Class: Counted,
	Why: "each user's id, sealed under a random key of its own kept beside it (migration 156), for reads of the tables that hold the user's reference",
	Scope: `t.org = p.org AND p.user_id <> '' AND t.user_ref = ANY(p.user_refs)
		AND NOT EXISTS (SELECT 1 FROM loom.memory_revisions r WHERE r.org = t.org AND r.user_id = t.user_ref)
		AND NOT EXISTS (SELECT 1 FROM loom.memory_evidence e WHERE e.org = t.org AND e.user_id = t.user_ref)
		AND NOT EXISTS (SELECT 1 FROM loom.extraction_requests x WHERE x.org = t.org AND x.user_id = t.user_ref)
		AND NOT EXISTS (SELECT 1 FROM loom.learnings_supporters s WHERE s.org = t.org AND s.user_id = t.user_ref)
		AND NOT EXISTS (SELECT 1 FROM loom.session_summaries d WHERE d.org = t.org AND d.user_id = t.user_ref)
		AND NOT EXISTS (SELECT 1 FROM loom.memory_chunks c WHERE c.org = t.org AND c.user_id = t.user_ref)
		AND NOT EXISTS (SELECT 1 FROM loom.knowledge_revisions k WHERE k.org = t.org AND k.user_id = t.user_ref)
		AND NOT EXISTS (SELECT 1 FROM loom.knowledge_jobs j WHERE j.org = t.org AND j.user_id = t.user_ref)`}

// learningsTables are the learnings queue's tables (internal/learnings, migration
// 130): rules about the agent and the users' quotes that support them, each sealed
// under a data key kept on its row alone. A user's erasure deletes the user's
// supporters, then every candidate left with no supporter; the census counts every
// unsupported candidate of the namespace, whichever erasure left it (the seeds'
// learnings_queue.delete step).
func learningsTables() []Table {
	return []Table{
		{Store: Postgres, Name: "loom.learnings_supporters", Class: Counted,
			Why:   "the users' quotes (sealed) that support rules about the agent, with their identities",
			Scope: `t.org = p.org AND t.namespace = p.ns AND (p.user_id = '' OR t.user_id = ANY(p.user_refs)) AND t.generation < p.fence`},
		{Store: Postgres, Name: "loom.learnings_queue", Class: Counted,
			Why: "rules about the agent (sealed) drawn from the users' conversations",
			Scope: `t.org = p.org AND t.namespace = p.ns AND ((p.user_id = '' AND t.generation < p.fence) OR (p.user_id <> '' AND NOT EXISTS (
				SELECT 1 FROM loom.learnings_supporters s WHERE s.org = t.org AND s.namespace = t.namespace AND s.candidate_id = t.candidate_id)))`},
	}
}

// postgresNoContent are the Postgres tables that hold no memory content: ids,
// counters, settings and ledgers; the census says why each is left.
func postgresNoContent() []Table {
	return []Table{
		{Store: Postgres, Name: "loom.worker_items", Class: NoMemoryContent,
			Why: "the workers' queue and stamps: memory ids, versions, content hashes, verdict codes and usage counts, no text"},
		{Store: Postgres, Name: "loom.conflict_undos", Class: NoMemoryContent, Why: "undone retirements: memory ids and content hashes"},
		{Store: Postgres, Name: "loom.profile_schemas", Class: NoMemoryContent, Why: "a namespace's profile schema an admin wrote (the profiles are memory rows)"},
		{Store: Postgres, Name: "loom.consolidation_runs", Class: NoMemoryContent,
			Why: "consolidation runs: memory ids, versions, counts and failure codes, no text (an undo reads the journal)"},
		{Store: Postgres, Name: "loom.search_calibration", Class: NoMemoryContent, Why: "medians and spreads of search scores: numbers, per namespace and embedder"},
		{Store: Postgres, Name: "loom.erased_memories", Class: NoMemoryContent, Why: "deletion evidence: namespaces and memory ids"},
		{Store: Postgres, Name: "loom.erased_documents", Class: NoMemoryContent, Why: "deletion evidence: namespaces, source URIs, versions and doc ids"},
		{Store: Postgres, Name: "loom.erasure_ledger", Class: NoMemoryContent, Why: "the sagas: scopes, steps and counts"},
		{Store: Postgres, Name: "loom.generation_records", Class: NoMemoryContent, Why: "erasure, redaction, turns and usage records: plain fields; a turns record's texts are sealed under its turns' own keys, " +
			"which live on the loom.memory_evidence rows the erasure deletes; a usage record names memory ids and counts only (no user, no text)"},
		{Store: Postgres, Name: "loom.scope_generations", Class: NoMemoryContent, Why: "counters"},
		{Store: Postgres, Name: "loom.projection_watermarks", Class: NoMemoryContent, Why: "counters"},
		{Store: Postgres, Name: "loom.projection_tables", Class: NoMemoryContent, Why: "generation numbers of the projection tables"},
		{Store: Postgres, Name: "loom.projection_failures", Class: NoMemoryContent,
			Why: "where the records a projection could not apply are on the topic, and why: seqs, offsets and reasons, no content"},
		{Store: Postgres, Name: "loom.namespaces", Class: NoMemoryContent, Why: "namespace policy an admin wrote"},
		{Store: Postgres, Name: "loom.blacklist", Class: NoMemoryContent, Why: "patterns an admin wrote"},
		{Store: Postgres, Name: "loom.llm_spend", Class: NoMemoryContent, Why: "model call tokens and cost per namespace and day"},
		{Store: Postgres, Name: "loom.model_call_holds", Class: NoMemoryContent, Why: "the per-org switch for model calls: the org, when and who"},
		{Store: Postgres, Name: "loom.memory_touches", Class: NoMemoryContent,
			Why: "usage (memory.touch, search's hits, evidence events) not yet published: memory ids and counts, no text (the fold drops the counts of a row gone)"},
		{Store: Postgres, Name: "loom.api_tokens", Class: NoMemoryContent,
			Why: "credential hashes; a token bound to a user names it by reference (migration 156) and seals its session, if it is bound to one, " +
				"under the user's name key (migration 179), so it reaches no user and no session once the user's name and key are erased, " +
				"and is revoked by an operator; a token bound to a session alone seals it under a key of its own, which an erasure destroys " +
				"once it removed the last rows naming the session (command/erasure_session_tokens.go), so the token reaches no session after it"},
		{Store: Postgres, Name: "loom.namespace_restores", Class: NoMemoryContent, Why: "completed restores: snapshot ids and counts"},
		{Store: Postgres, Name: "loom.audit_checkpoints", Class: NoMemoryContent, Why: "the audit chain's checkpoints: seqs and hashes, no keys, values or user ids"},
		{Store: Postgres, Name: "loom.read_audit", Class: NoMemoryContent, Why: "hash-only audit of snapshots and exports: ids, counts and digests"},
		{Store: Postgres, Name: "loom.namespace_operations", Class: NoMemoryContent, Why: "audit of restores, rollbacks and blacklist sweeps: ids, parameters, counts and errors"},
		{Store: Postgres, Name: "loom.user_ref_keys", Class: NoMemoryContent,
			Why: "each org's key the topic names users by (user_ref); kept, so a user's later records keep their reference"},
		{Store: Postgres, Name: "loom.ref_rotation_map", Class: NoMemoryContent,
			Why: "a running rotation's mapping of references under the retired user reference key to the current one (migration 185): " +
				"no clear value, and dropped with the retired key when the rotation ends"},
		{Store: Postgres, Name: "loom.ref_rotations", Class: NoMemoryContent,
			Why: "when each running rotation of an org's user reference key swapped it (migration 185): the org and a time"},
		{Store: Postgres, Name: "loom.name_wrap_keys", Class: NoMemoryContent,
			Why: "each org's key that wraps its users' name keys (migration 158); replaced at a KEK rotation, so kept copies of an erased name open for no one"},
		{Store: Postgres, Name: "loom.authority", Class: NoMemoryContent, Why: "the deployment record"},
		{Store: Postgres, Name: "loom.pg_migrations", Class: NoMemoryContent, Why: "the migration ledger"},
	}
}

// clickhouseTables are the projection's tables and ClickHouse's own records.
func clickhouseTables() []Table {
	return []Table{
		{Store: ClickHouse, Name: "loom.memory", Class: Counted, Why: "current rows"},
		{Store: ClickHouse, Name: "loom.memory_versions", Class: Counted, Why: "history rows"},
		{Store: ClickHouse, Name: "loom.memory_embeddings", Class: Counted, Why: "search documents: vectors and tags"},
		{Store: ClickHouse, Name: "loom.memory_lexical", Class: Counted, Why: "index terms of values and keys"},
		{Store: ClickHouse, Name: "loom.memory_chunks", Class: Counted, Why: "windows of long values and their vectors"},
		{Store: ClickHouse, Name: "loom.audit_log", Class: Counted, Why: "the audit trail outlives the memory but not its key, content hash or user id (nor, on rows of the chain's writer format, its agent or session id): scrubbed, or deleted by a purge"},
		{Store: ClickHouse, Name: "loom.entities", Class: Counted, Why: "entity names and aliases the scope's rows declared"},
		{Store: ClickHouse, Name: "loom.entity_sightings", Class: Counted,
			Why: "which record of which memory declared each entity spelling and type: names, aliases, types and users"},
		{Store: ClickHouse, Name: "loom.entity_triple_rows", Class: Counted, Why: "which of the scope's rows state which fact: keys and entity names"},
		{Store: ClickHouse, Name: "loom.entity_edge_rows", Class: Counted, Why: "which of the scope's rows name which pair of entities"},
		{Store: ClickHouse, Name: "loom.entity_triples", Class: Counted, Why: "facts (entity names and objects) the scope's records opened or closed; " +
			"a user's part is found, and counted, through its link rows, which are erased after it"},
		{Store: ClickHouse, Name: "loom.entity_edges", Class: Counted, Why: "entity pairs the scope's records opened or closed; a user's part as for entity_triples"},
		{Store: ClickHouse, Name: "loom.documents", Class: Counted, Why: "knowledge document revisions: source URIs, titles and tags"},
		{Store: ClickHouse, Name: "loom.chunks", Class: Counted, Why: "knowledge chunks: text and vectors"},
		{Store: ClickHouse, Name: "loom.storage_authority", Class: NoMemoryContent, Why: "the deployment record"},
		{Store: ClickHouse, Name: "loom.ch_migrations", Class: NoMemoryContent, Why: "the migration ledger"},
	}
}

// Classify finds the registry entry of a table by its Key. A copy of a projection
// table in another set (a rebuild's, or one kept after a switch, loom.memory__g3) is
// classified as the table it copies: every erasure, redaction and census reaches
// every set (tableset.Existing).
func Classify(key string) (Table, bool) {
	name := key
	if rest, ok := strings.CutPrefix(key, ClickHouse+":"+"loom."); ok {
		if table, set, ok := tableset.Parse(rest); ok && !set.IsServing() {
			name = ClickHouse + ":" + tableset.Serving().Qualified(table)
		}
	}
	for _, t := range Tables() {
		if t.Key() == name {
			return t, true
		}
	}
	return Table{}, false
}

// rowScope is the scope of the tables keyed by a memory row's identity and seq.
const rowScope = `t.org = p.org AND t.namespace = p.ns AND (p.user_id = '' OR t.user_id = ANY(p.user_refs)) AND t.seq < p.fence`

// documentScope is the scope of the knowledge tables, as postgres-authority's
// pg_knowledge.delete takes it: every document of a namespace's (or its org's)
// erasure; a user's erasure takes the documents written for the user (their user_id,
// the user's reference, migration 157), and leaves the namespace's, which no user
// owns (its user_id is empty).
const documentScope = `t.org = p.org AND t.namespace = p.ns AND (p.user_id = '' OR t.user_id = ANY(p.user_refs)) AND t.seq < p.fence`

// ScopeParams is the CTE that binds a Postgres scope's parameters: $1 org, $2
// namespace, $3 user_id (empty for the whole namespace), $4 fence, $5 erasure id. The
// tables name a user by reference (migration 155): p.user_id is the user's under the
// org's current key (empty for the whole namespace), p.user_refs the user's under every
// live key (migration 182: while a rotation runs, rows named under the retired key are
// the user's too), which the predicates match; p.user_name is the id, for what keeps it
// in JSON (the outbox's version 1 records, parked search pools, kept traces).
const ScopeParams = `WITH p AS (SELECT $1::text AS org, $2::text AS ns, coalesce((SELECT loom.user_ref($1::text, $3::text)), 'no reference key') AS user_id,
	coalesce((SELECT loom.user_refs($1::text, $3::text)), ARRAY['no reference key']) AS user_refs,
	$3::text AS user_name, $4::bigint AS fence, $5::uuid AS erasure)`
