package workers

import (
	"fmt"

	"github.com/loomplane/loom/internal/heads"
)

// The claims of loom.worker_items (claimWork). Both lease the due items of the worker
// that nothing holds back: an org with an erasure running, an org whose model calls are
// held (loom.model_call_holds, internal/llm/spend) for a worker that calls a model ($4),
// a namespace namespace.delete soft-deleted (its items stay owed).
const claimDueSQL = `SELECT w.ctid AS tid, org, namespace, memory_id, version, seq, next_at
			FROM loom.worker_items w
			WHERE worker = $1 AND state = 'owed' AND next_at <= now() AND (lease_until IS NULL OR lease_until < now())
			  AND NOT EXISTS (SELECT 1 FROM loom.erasure_ledger l WHERE l.org = w.org AND l.status = 'running')
			  AND NOT ($4 AND EXISTS (SELECT 1 FROM loom.model_call_holds h WHERE h.org = w.org))
			  AND NOT EXISTS (SELECT 1 FROM loom.namespaces n WHERE n.org = w.org AND n.namespace = w.namespace AND n.deleted_at IS NOT NULL)`

// claimLeaseSQL leases the picked items, still owed and unleased.
const claimLeaseSQL = `UPDATE loom.worker_items w SET lease_until = now() + $3::interval
		FROM picked p
		WHERE w.worker = $1 AND w.org = p.org AND w.namespace = p.namespace AND w.memory_id = p.memory_id AND w.version = p.version
		  AND w.state = 'owed' AND (w.lease_until IS NULL OR w.lease_until < now())`

// claimItemsSQL leases up to $2 items of a row's worker, in turns across namespaces so
// one namespace's backlog holds back no other: each namespace's newest rows first
// (newest), or its oldest (seq order), and within a turn the namespace due longest
// first (one given back due later waits behind the others rather than taking the batch
// again). Each comes with its user named and its version's plain content hash, from its
// journal row opened (” once redacted or erased): the queue keeps it keyed only
// (migration 101).
func claimItemsSQL(newest bool) string {
	order := "seq ASC"
	if newest {
		order = "seq DESC"
	}
	return fmt.Sprintf(`WITH due AS (
			SELECT d.*, row_number() OVER (PARTITION BY org, namespace ORDER BY %s) AS turn FROM (`+claimDueSQL+`) d
		), picked AS (
			SELECT org, namespace, memory_id, version FROM due ORDER BY turn, next_at, org, namespace LIMIT $2
		)
		`+claimLeaseSQL+`
		RETURNING w.org, w.namespace, w.memory_id::text, w.version, w.seq, loom.user_name(w.org, w.user_id),
			coalesce((SELECT `+heads.RowOf("r")+`->>'content_sha256' FROM loom.memory_revisions r
				WHERE r.org = w.org AND r.namespace = w.namespace AND r.seq = w.seq), ''),
			w.written_at, w.attempts, w.detail`, order)
}

// claimNamespacesSQL leases every due item of up to $2 namespaces, the namespace due
// longest first, at most $5 items: a pass fed by namespace works each namespace once
// for all of its items (due_passes.go), so it takes them whole. Taken $2 items at a
// time, a namespace a write made due took one claim per $2 of its writes, and each
// claim ranked every due item of the worker: in the set scenario at 32 namespaces the
// recalibration pass's claims were the largest Postgres cost after the write's own
// statements (about 24 ms each, 0.4 ms a write). Its items are records' due marks: no
// user or content hash to return. The picked rows are leased by their row ids (a TID
// scan each), not joined back by key: thousands of them, with the queue's statistics
// behind (its rows come and go by the second), were joined as a nested loop over the
// whole queue, a second and more a claim. Nor as ctid = ANY (an array of them): that
// was planned as a filter on the owed items' index scan, each owed row compared with
// every picked id (1,458 owed, 1,249 picked: 51 ms of an 81 ms claim, EXPLAIN ANALYZE
// on a set bench's queue; joined, 23 ms). A row another pass leased meanwhile has a
// new row id and the same conditions rechecked: it is left out.
//
// What holds a namespace back (its org's erasure, its org's held model calls, its
// soft deletion) is a namespace's, so it is checked once a namespace, after the due
// items are grouped: checked on each item (claimDueSQL) it was a nested loop of three
// index probes an item, two thirds of the claim's buffer reads with thousands due.
const claimNamespacesSQL = `WITH due AS (SELECT w.ctid AS tid, org, namespace, seq, next_at
			FROM loom.worker_items w
			WHERE worker = $1 AND state = 'owed' AND next_at <= now() AND (lease_until IS NULL OR lease_until < now())
		), spaces AS (
			SELECT g.org, g.namespace FROM (SELECT org, namespace, min(next_at) AS since FROM due GROUP BY org, namespace) g
			WHERE NOT EXISTS (SELECT 1 FROM loom.erasure_ledger l WHERE l.org = g.org AND l.status = 'running')
			  AND NOT ($4 AND EXISTS (SELECT 1 FROM loom.model_call_holds h WHERE h.org = g.org))
			  AND NOT EXISTS (SELECT 1 FROM loom.namespaces n WHERE n.org = g.org AND n.namespace = g.namespace AND n.deleted_at IS NOT NULL)
			ORDER BY g.since, g.org, g.namespace LIMIT $2
		), picked AS (
			SELECT d.tid FROM due d JOIN spaces s ON s.org = d.org AND s.namespace = d.namespace
			ORDER BY d.next_at, d.seq LIMIT $5
		)
		UPDATE loom.worker_items w SET lease_until = now() + $3::interval
		FROM picked p
		WHERE w.ctid = p.tid
		  AND w.worker = $1 AND w.state = 'owed' AND (w.lease_until IS NULL OR w.lease_until < now())
		RETURNING w.org, w.namespace, w.memory_id::text, w.version, w.seq, ''::text, ''::text, w.written_at, w.attempts, w.detail`

// namespaceClaimItems bounds the items one claim of a pass fed by namespace leases (a
// replay's backlog can owe a namespace hundreds of thousands).
const namespaceClaimItems = 5000

// claimedNamespaces is how many namespaces a claim's items name.
func claimedNamespaces(items []workItem) int {
	seen := map[[2]string]bool{}
	for _, it := range items {
		seen[[2]string{it.org, it.namespace}] = true
	}
	return len(seen)
}
