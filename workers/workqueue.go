package workers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// loom.worker_items is the workers' queue (workers.go): one row per written version a
// worker owes something, queued by the worker's consumer group, drained by its passes
// and kept, done, as the version's stamp. This file owns the table: every statement of
// it is here, and no other package reads or writes it. Its claims leave out an org
// whose erasure runs by a NOT EXISTS over loom.erasure_ledger in the same statement (a
// claim and that check are one snapshot); the ledger's other statements are command's
// (command/erasure_ledger_store.go).

// Worker names, as the worker column and the consumer group name it.
const (
	workerResolver = "conflict_resolver"
	workerEntities = "entity_extractor"
	// workerEmbedding fills embedding stubs (embedding_worker.go).
	workerEmbedding = "embedding_worker"
	// workerUsageFold folds the memory.usage_recorded records' counts (usage_fold.go):
	// one item per memory a record counts.
	workerUsageFold = "usage_fold"
)

// workItem is one written version a worker owes something.
type workItem struct {
	worker                   string
	org, namespace, memoryID string
	version, seq             int64
	userID, sha              string
	writtenAt                time.Time
	attempts                 int
	// detail is what the feed queued with the item, as worker_items.detail keeps it
	// (nil: nothing): a usage record's counts of the memory (usage_fold.go).
	detail []byte
}

// Outcomes of a done item.
const (
	outcomeJudged    = "judged"    // the resolver called the model and acted on its answer
	outcomeErrored   = "errored"   // the provider refused the request, or answered nothing usable
	outcomeSkipped   = "skipped"   // nothing left to do: the row moved on, is pinned, has no peer
	outcomeTooOld    = "too_old"   // owed past the worker's age limit
	outcomeExtracted = "extracted" // the extractor wrote the row's entities
	outcomeEmpty     = "empty"     // the extractor found no entity in the row
	outcomeEmbedded  = "embedded"  // the embedding worker committed the stub's vectors
	outcomeFolded    = "folded"    // the usage fold committed the record's counts into the memory's head
	outcomeDropped   = "dropped"   // the usage fold found the memory gone or no longer served: its counts are dropped
)

// queueWork queues items; an item queued before (a redelivery, a replay of the group)
// is left as it is, done or owed. due reports whether it queued an item a pass may
// claim now. An item of a pass fed by namespace is due no earlier than the items its
// namespace already owes: a pass gave those back until the namespace is due (its
// interval, the projection reaching them), and would give the new one back with them.
func (s *Service) queueWork(ctx context.Context, items []workItem) (due bool, err error) {
	if len(items) == 0 {
		return false, nil
	}
	n := len(items)
	workers, orgs, nss, ids, users, shas := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions, seqs := make([]int64, n), make([]int64, n)
	written := make([]time.Time, n)
	details := make([]*string, n)
	for i, it := range items {
		workers[i], orgs[i], nss[i], ids[i], users[i], shas[i] = it.worker, it.org, it.namespace, it.memoryID, it.userID, it.sha
		versions[i], seqs[i], written[i] = it.version, it.seq, it.writtenAt
		if it.detail != nil {
			d := string(it.detail)
			details[i] = &d
		}
	}
	// The content hash as the heads keep it: keyed under the scope's key (migration
	// 101; '' once an erasure destroyed it). A claim reads the plain one from the
	// journal (claimWork). An item with no hash (a record's due mark, a usage count)
	// keeps '': keying nothing opened the scope's key a row, most of the insert's
	// cost. The namespace's owed items are read through worker_items_owed_by_namespace
	// (migration 164).
	rows, err := s.pool.Query(ctx, `INSERT INTO loom.worker_items (worker, org, namespace, memory_id, version, seq, user_id, content_sha256, written_at, detail, next_at)
		SELECT w, o, ns, id, v, sq, loom.named_user(o, u), CASE WHEN sha = '' THEN '' ELSE coalesce(loom.content_hash(o, ns, loom.user_ref(o, u), sha), '') END, at, d,
			greatest(now(), (SELECT max(x.next_at) FROM loom.worker_items x
				WHERE $11 AND x.worker = w AND x.org = o AND x.namespace = ns AND x.state = 'owed'))
		FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::timestamptz[], $10::jsonb[])
			AS i(w, o, ns, id, v, sq, u, sha, at, d)
		ON CONFLICT (worker, org, namespace, memory_id, version) DO NOTHING
		RETURNING next_at <= now()`,
		workers, orgs, nss, ids, versions, seqs, users, shas, written, details, fedByNamespace(items[0].worker))
	if err == nil {
		var now bool
		_, err = pgx.ForEachRow(rows, []any{&now}, func() error {
			due = due || now
			return nil
		})
	}
	if err != nil {
		return false, fmt.Errorf("queue the %s's work: %w", items[0].worker, err)
	}
	return due, nil
}

// claimPass claims a pass's batch (claimWork) and starts the pass's account; a queue
// it cannot read ends the pass (ok false).
func (s *Service) claimPass(ctx context.Context, worker string, batch int, maxAge time.Duration, newest bool) ([]workItem, passResult, bool) {
	items, err := s.claimWork(ctx, worker, batch, workLease, maxAge, newest)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("worker: reading the queue failed", "worker", worker, "err", err)
		}
		return nil, passResult{errors: 1, stopped: true}, false
	}
	full := len(items) == batch
	if fedByNamespace(worker) {
		full = claimedNamespaces(items) == batch || len(items) == namespaceClaimItems
	}
	return items, passResult{claimed: len(items), full: full}, true
}

// claimWork leases owed items of worker that are due (workqueue_claim.go): up to limit
// items of a row's worker, in turns across namespaces, or every due item of up to limit
// namespaces for a pass fed by namespace. An org with an erasure running is left out:
// its rows stay owed; so is an org whose model calls are held for a worker that calls a
// model, and a soft-deleted namespace. Items written before maxAge ago are done first,
// as too old.
func (s *Service) claimWork(ctx context.Context, worker string, limit int, lease, maxAge time.Duration, newest bool) ([]workItem, error) {
	if _, err := s.pool.Exec(ctx, `UPDATE loom.worker_items SET state = 'done', outcome = $2, done_at = now(), lease_until = NULL
		WHERE worker = $1 AND state = 'owed' AND written_at < now() - $3::interval`, worker, outcomeTooOld, maxAge.String()); err != nil {
		return nil, fmt.Errorf("age the %s's queue: %w", worker, err)
	}
	query, args := claimItemsSQL(newest), []any{worker, limit, lease.String(), callsModel(worker)}
	if fedByNamespace(worker) {
		query, args = claimNamespacesSQL, append(args, namespaceClaimItems)
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("claim the %s's work: %w", worker, err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (workItem, error) {
		it := workItem{worker: worker}
		err := r.Scan(&it.org, &it.namespace, &it.memoryID, &it.version, &it.seq, &it.userID, &it.sha, &it.writtenAt, &it.attempts, &it.detail)
		return it, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim the %s's work: %w", worker, err)
	}
	return items, nil
}

// releaseWork gives an item back, owed, due again after delay; attempt counts one more
// attempt against it.
func (s *Service) releaseWork(ctx context.Context, it workItem, delay time.Duration, attempt bool) error {
	inc := 0
	if attempt {
		inc = 1
	}
	_, err := s.pool.Exec(ctx, `UPDATE loom.worker_items SET lease_until = NULL, next_at = now() + $6::interval, attempts = attempts + $7
		WHERE worker = $1 AND org = $2 AND namespace = $3 AND memory_id = $4 AND version = $5 AND state = 'owed'`,
		it.worker, it.org, it.namespace, it.memoryID, it.version, delay.String(), inc)
	if err != nil {
		return fmt.Errorf("give back the %s's item: %w", it.worker, err)
	}
	return nil
}

// releaseWorkAll gives items back as releaseWork does, in one statement: a namespace
// pass gives back all of a namespace's items at once (due_passes.go), and one round trip
// and one commit for the batch, not one per item, is what a write into a namespace whose
// projection is behind costs the pass.
func (s *Service) releaseWorkAll(ctx context.Context, items []workItem, delay time.Duration, attempt bool) error {
	if len(items) == 0 {
		return nil
	}
	inc := 0
	if attempt {
		inc = 1
	}
	workers, orgs, nss, ids, versions := itemKeys(items)
	_, err := s.pool.Exec(ctx, `UPDATE loom.worker_items w SET lease_until = NULL, next_at = now() + $6::interval, attempts = w.attempts + $7
		FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[], $5::bigint[]) AS i(wk, o, ns, id, v)
		WHERE w.worker = i.wk AND w.org = i.o AND w.namespace = i.ns AND w.memory_id = i.id AND w.version = i.v AND w.state = 'owed'`,
		workers, orgs, nss, ids, versions, delay.String(), inc)
	if err != nil {
		return fmt.Errorf("give back the %s's items: %w", items[0].worker, err)
	}
	return nil
}

// finishWorkAll stamps items done with one outcome and no detail, as finishWork does, in
// one statement, and answers which of them it stamped (an item left out stays owed: its
// org's erasure runs, or it is no longer owed).
func (s *Service) finishWorkAll(ctx context.Context, items []workItem, outcome string) (map[workKey]bool, error) {
	workers, orgs, nss, ids, versions := itemKeys(items)
	rows, err := s.pool.Query(ctx, `UPDATE loom.worker_items w SET state = 'done', outcome = $6, detail = 'null', done_at = now(), lease_until = NULL,
			attempts = w.attempts + CASE WHEN $6 = 'errored' THEN 1 ELSE 0 END
		FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[], $5::bigint[]) AS i(wk, o, ns, id, v)
		WHERE w.worker = i.wk AND w.org = i.o AND w.namespace = i.ns AND w.memory_id = i.id AND w.version = i.v AND w.state = 'owed'
		  AND NOT EXISTS (SELECT 1 FROM loom.erasure_ledger l WHERE l.org = w.org AND l.status = 'running')
		RETURNING w.worker, w.org, w.namespace, w.memory_id::text, w.version`,
		workers, orgs, nss, ids, versions, outcome)
	if err != nil {
		return nil, fmt.Errorf("stamp the %s's items: %w", items[0].worker, err)
	}
	stamped := map[workKey]bool{}
	var k workKey
	_, err = pgx.ForEachRow(rows, []any{&k.worker, &k.org, &k.namespace, &k.memoryID, &k.version}, func() error {
		stamped[k] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stamp the %s's items: %w", items[0].worker, err)
	}
	return stamped, nil
}

// workKey is an item's key in loom.worker_items.
type workKey struct {
	worker, org, namespace, memoryID string
	version                          int64
}

func (it workItem) key() workKey {
	return workKey{it.worker, it.org, it.namespace, it.memoryID, it.version}
}

// itemKeys is the items' keys as the columns' arrays.
func itemKeys(items []workItem) (workers, orgs, nss, ids []string, versions []int64) {
	n := len(items)
	workers, orgs, nss, ids, versions = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	for i, it := range items {
		workers[i], orgs[i], nss[i], ids[i], versions[i] = it.worker, it.org, it.namespace, it.memoryID, it.version
	}
	return workers, orgs, nss, ids, versions
}

// finishWork stamps an item done with its outcome, unless an erasure of its org is running
// (then the item stays owed and finish reports false): nothing is written in an org
// under erasure, the stamp included.
func (s *Service) finishWork(ctx context.Context, it workItem, outcome string, detail []byte) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE loom.worker_items w SET state = 'done', outcome = $6, detail = $7, done_at = now(), lease_until = NULL,
			attempts = attempts + CASE WHEN $6 = 'errored' THEN 1 ELSE 0 END
		WHERE worker = $1 AND org = $2 AND namespace = $3 AND memory_id = $4 AND version = $5 AND state = 'owed'
		  AND NOT EXISTS (SELECT 1 FROM loom.erasure_ledger l WHERE l.org = w.org AND l.status = 'running')`,
		it.worker, it.org, it.namespace, it.memoryID, it.version, outcome, detail)
	if err != nil {
		return false, fmt.Errorf("stamp the %s's item: %w", it.worker, err)
	}
	return tag.RowsAffected() == 1, nil
}

// errStampTaken: an item a commit meant to stamp is no longer owed (another pass,
// its lease lapsed, did it first); the commit is rolled back.
var errStampTaken = errors.New("an item is no longer owed")

// finishWorkTx stamps items done with outcome in tx, the transaction that commits
// their work, so the work and its stamp land together or not at all; errStampTaken
// (roll back) when one of them is no longer owed.
func finishWorkTx(ctx context.Context, tx pgx.Tx, items []workItem, outcome string) error {
	if len(items) == 0 {
		return nil
	}
	ids, versions := make([]string, len(items)), make([]int64, len(items))
	for i, it := range items {
		ids[i], versions[i] = it.memoryID, it.version
	}
	it := items[0]
	tag, err := tx.Exec(ctx, `UPDATE loom.worker_items w SET state = 'done', outcome = $4, done_at = now(), lease_until = NULL
		FROM unnest($5::uuid[], $6::bigint[]) AS i(id, v)
		WHERE w.worker = $1 AND w.org = $2 AND w.namespace = $3 AND w.memory_id = i.id AND w.version = i.v AND w.state = 'owed'`,
		it.worker, it.org, it.namespace, outcome, ids, versions)
	if err != nil {
		return fmt.Errorf("stamp the %s's items: %w", it.worker, err)
	}
	if tag.RowsAffected() != int64(len(items)) {
		return errStampTaken
	}
	return nil
}

// sweepDone forgets done items older than keep: a replay no longer queues a write that
// old (the worker's age limit is below keep), so their stamps are no longer needed.
func (s *Service) sweepDone(ctx context.Context, worker string, keep time.Duration) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM loom.worker_items WHERE worker = $1 AND state = 'done' AND done_at < now() - $2::interval`,
		worker, keep.String())
	if err != nil {
		return fmt.Errorf("sweep the %s's stamps: %w", worker, err)
	}
	return nil
}

// QueueHealth is one worker's queue as /v1/health?include=workers reports it: what it
// owes, what it did, its failures (items done as errored), and when it last did one.
type QueueHealth struct {
	Owed       int64      `json:"owed"`
	Done       int64      `json:"done"`
	Failures   int64      `json:"failures"`
	LastDoneAt *time.Time `json:"last_done_at"`
}

// ReadQueueHealth reads every worker's queue (the stamps kept: LOOM_*_MAX_AGE_DAYS
// past a day), by worker name.
func ReadQueueHealth(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) (map[string]QueueHealth, error) {
	rows, err := q.Query(ctx, `SELECT worker, count(*) FILTER (WHERE state = 'owed'), count(*) FILTER (WHERE state = 'done'),
			count(*) FILTER (WHERE outcome = 'errored'), max(done_at)
		FROM loom.worker_items GROUP BY worker`)
	if err != nil {
		return nil, fmt.Errorf("read the workers' queues: %w", err)
	}
	defer rows.Close()
	out := map[string]QueueHealth{}
	for _, w := range Names() {
		out[w] = QueueHealth{}
	}
	for rows.Next() {
		var name string
		var h QueueHealth
		if err := rows.Scan(&name, &h.Owed, &h.Done, &h.Failures, &h.LastDoneAt); err != nil {
			return nil, fmt.Errorf("read the workers' queues: %w", err)
		}
		out[name] = h
	}
	return out, rows.Err()
}

// callsModel reports whether a worker calls a model: a held org's rows wait for it.
func callsModel(worker string) bool {
	return worker == workerResolver || worker == workerEntities || worker == workerProfile || worker == workerConsolidation
}
