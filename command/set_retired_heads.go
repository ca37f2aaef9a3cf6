package command

import (
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/userref"
)

// While a rotation of an org's user reference key runs (docs/architecture.md, issue
// 28), a key's head may still be named under the retired key until the rewrite reaches
// it. A write of the key revises that head: the round finds it (keyRefs names the keys
// under every live key), the commit locks it and checks its version as its own, writes
// the new head under the current key and deletes the one under the retired key in the
// same transaction. Without this the write made a second memory of the key.

// nameRetired names pr's row under the org's retired key too, when a rotation runs
// (live holds it after the current key); else pr.retiredRefs stays nil.
func nameRetired(pr *pending, live []userref.Generation) error {
	if len(live) < 2 {
		return nil
	}
	refs, err := columnRefsOf(live[1].Key, pr.row.Identity)
	if err != nil {
		return err
	}
	pr.retiredRefs = &refs
	return nil
}

// queueLockHeadsAcrossGenerations is queueLockHeads while a rotation runs: each key's
// head is the one under the current key's references (refs[i]) or, when it has none,
// the one under the retired key's (retired[i], nil: as refs[i]); its version and seq
// are read into versions[i] and seqs[i] (0 when neither exists). Both are locked, each
// an equality on the key's identity: an OR of the two was planned as a scan of the
// namespace's heads (EXPLAIN: the index bound on org and namespace alone).
func queueLockHeadsAcrossGenerations(b *pgx.Batch, ids []memrow.Identity, refs []columnRefs, retired []*columnRefs, versions, seqs []*int64) {
	n := len(ids)
	cols := make([][]string, 10)
	for c := range cols {
		cols[c] = make([]string, n)
	}
	for i, id := range ids {
		r, old := refs[i], refs[i]
		if retired[i] != nil {
			old = *retired[i]
		}
		for c, v := range []string{id.Org, id.Namespace, r.agent, r.user, r.session, r.key, old.agent, old.user, old.session, old.key} {
			cols[c][i] = v
		}
	}
	b.Queue(`WITH t AS MATERIALIZED (
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
			FOR UPDATE) r ON true`,
		cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8], cols[9]).Query(func(rows pgx.Rows) error {
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
