package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
)

// erasePostgres is the saga's step 1, one transaction. Advancing each namespace's
// generation takes its lock, so the namespace's commits wait for the erasure, and its
// new generation is the fence: every row of the scope below it goes, and a write built
// from a head read before it is refused at its commit (the deletion evidence). The
// ledger row is locked first, so a step that committed never runs twice.
func (s *Service) erasePostgres(ctx context.Context, sg *erasureSaga, attempt int) error {
	return pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var raw []byte
		var current int
		if err := tx.QueryRow(ctx, `SELECT steps, attempts FROM loom.erasure_ledger WHERE org = $1 AND id = $2 FOR UPDATE`,
			sg.Org, sg.ID).Scan(&raw, &current); err != nil {
			return fmt.Errorf("lock the erasure: %w", err)
		}
		var st sagaState
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("decode the erasure's steps: %w", err)
		}
		if current != attempt {
			return errSagaTakenOver
		}
		if _, done := st.Done[stepPostgres]; done {
			return nil
		}
		namespaces, err := s.erasureNamespaces(ctx, tx, sg)
		if err != nil {
			return err
		}
		fences := map[string]int64{}
		removed := map[string]int64{}
		for k, v := range sg.Removed {
			removed[k] = v
		}
		for _, ns := range namespaces {
			gen, err := generations.Bump(ctx, tx, sg.Org, ns)
			if errors.Is(err, generations.ErrUnwritten) {
				continue // never written: nothing to erase
			}
			if err != nil {
				return fmt.Errorf("advance the generation of %s: %w", ns, err)
			}
			counts, err := s.eraseNamespace(ctx, tx, sg, ns, gen)
			if err != nil {
				return err
			}
			for k, v := range counts {
				removed[k] += v
			}
			fences[ns] = gen
		}
		sg.Fences, sg.Removed = fences, removed
		sg.Steps[stepPostgres] = s.now().UTC()
		rawState, _ := json.Marshal(sg.state())
		rawFences, _ := json.Marshal(fences)
		rawRemoved, _ := json.Marshal(removed)
		b := &pgx.Batch{}
		b.Queue(`UPDATE loom.erasure_ledger SET steps = $3, fences = $4, removed = $5, last_error = NULL,
			lease_until = now() + $6::interval, updated_at = now() WHERE org = $1 AND id = $2`,
			sg.Org, sg.ID, rawState, rawFences, rawRemoved, s.cfg.Erasure.Lease.String())
		outbox.QueueNotify(b)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("checkpoint the Postgres step: %w", err)
		}
		return nil
	})
}

// erasureNamespaces lists the namespaces a saga's step 1 fences, in lock order: the
// named ones, or those where the user holds any row, and every namespace an earlier
// run fenced (a census that re-opened the step finds the rows it left there).
func (s *Service) erasureNamespaces(ctx context.Context, tx pgx.Tx, sg *erasureSaga) ([]string, error) {
	set := map[string]bool{}
	for _, ns := range sg.Scope.Namespaces {
		set[ns] = true
	}
	for ns := range sg.Fences {
		set[ns] = true
	}
	if sg.Scope.Kind == scopeUserInOrg {
		rows, err := tx.Query(ctx, `SELECT namespace FROM loom.memory_revisions WHERE org = $1 AND user_id = $2
			UNION SELECT namespace FROM loom.memory_current WHERE org = $1 AND user_id = $2
			UNION SELECT namespace FROM loom.extraction_requests WHERE org = $1 AND user_id = $2`, sg.Org, sg.Scope.UserID)
		if err != nil {
			return nil, fmt.Errorf("find the user's namespaces: %w", err)
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("find the user's namespaces: %w", err)
		}
		for _, ns := range found {
			set[ns] = true
		}
	}
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out, nil
}

// eraseNamespace removes the scope's rows of one namespace below its fence, records
// the evidence, and queues the namespace's memory.erased record. It returns what it
// removed, by kind.
func (s *Service) eraseNamespace(ctx context.Context, tx pgx.Tx, sg *erasureSaga, ns string, fence int64) (map[string]int64, error) {
	args := []any{sg.Org, ns, sg.Scope.UserID, fence, sg.ID}
	scope := pgScopes()
	counts := map[string]int64{}
	ids := map[string]bool{}
	for _, table := range []string{"loom.memory_current", "loom.memory_revisions"} {
		rows, err := tx.Query(ctx, fmt.Sprintf(`%s DELETE FROM %s t USING p WHERE %s RETURNING t.memory_id::text`,
			erasure.ScopeParams, table, scope[table]), args...)
		if err != nil {
			return nil, fmt.Errorf("erase %s of %s: %w", table, ns, err)
		}
		removed, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("erase %s of %s: %w", table, ns, err)
		}
		for _, id := range removed {
			ids[id] = true
		}
		counts[table] = int64(len(removed))
	}
	tag, err := tx.Exec(ctx, fmt.Sprintf(`%s DELETE FROM loom.entity_aliases t USING p WHERE %s`, erasure.ScopeParams,
		scope["loom.entity_aliases"]), args...)
	if err != nil {
		return nil, fmt.Errorf("erase the entity aliases of %s: %w", ns, err)
	}
	counts["loom.entity_aliases"] = tag.RowsAffected()
	// The keys go after their revisions: a user's keys are those left without one.
	tag, err = tx.Exec(ctx, fmt.Sprintf(`%s DELETE FROM loom.revision_keys t USING p WHERE %s`, erasure.ScopeParams,
		scope["loom.revision_keys"]), args...)
	if err != nil {
		return nil, fmt.Errorf("destroy the data keys of %s: %w", ns, err)
	}
	counts["loom.revision_keys"] = tag.RowsAffected()
	// A parked row's seq was published as a placeholder already: it is not withdrawn.
	deleted, withdrawn, err := outbox.Withdraw(ctx, tx, erasure.ScopeParams, scope["loom.outbox"], args...)
	if err != nil {
		return nil, fmt.Errorf("withdraw the unpublished records of %s: %w", ns, err)
	}
	counts["loom.outbox"] = deleted
	list := make([]string, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO loom.erased_memories (org, namespace, memory_id, erasure_id)
		SELECT $1, $2, id::uuid, $4 FROM unnest($3::text[]) AS id
		ON CONFLICT (org, namespace, memory_id) DO UPDATE SET erasure_id = EXCLUDED.erasure_id, erased_at = now(), quiet_at = NULL`,
		sg.Org, ns, list, sg.ID)
	// The answers naming an erased memory are fenced: a new token, so a request still
	// holding the key stores no answer, and a retry answers 404 for the whole request.
	b.Queue(fmt.Sprintf(`%s UPDATE loom.idempotency t SET state = 'erased', revisions = NULL, answer = NULL, token = t.token + 1
		FROM p WHERE %s`, erasure.ScopeParams, scope["loom.idempotency"]), args...).Exec(func(tag pgconn.CommandTag) error {
		counts["loom.idempotency"] = tag.RowsAffected()
		return nil
	})
	// Parked pages and kept search traces name the scope's keys; deferred extractions go
	// with their sealed transcripts and keys: a request not yet extracted never is, and
	// the topic's copy of it no longer opens.
	for _, table := range []string{"loom.search_pages", "loom.search_traces", "loom.extraction_requests"} {
		b.Queue(fmt.Sprintf(`%s DELETE FROM %s t USING p WHERE %s`, erasure.ScopeParams, table, scope[table]), args...).
			Exec(func(tag pgconn.CommandTag) error {
				counts[table] = tag.RowsAffected()
				return nil
			})
	}
	kind, userRef := events.ErasureScopeNamespace, ""
	if sg.Scope.UserID != "" {
		kind = events.ErasureScopeUser
		if userRef, err = s.userRefs.Ref(ctx, sg.Org, sg.Scope.UserID); err != nil {
			return nil, err
		}
	}
	env := &events.Envelope{Version: events.EnvelopeVersion, ID: events.RecordID(sg.Org, ns, fence), Type: events.TypeErased,
		Org: sg.Org, Namespace: ns, Seq: fence, CommittedAt: s.now().UTC(),
		Erasure: &events.Erasure{ID: sg.ID, Scope: kind, UserRef: userRef, Purge: sg.Purge, Generation: fence, Withdrawn: withdrawn}}
	if err := s.queueGenerationRecord(b, env); err != nil {
		return nil, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("record the erasure of %s: %w", ns, err)
	}
	counts["memories"] = int64(len(list))
	counts["withdrawn"] = withdrawn
	return counts, nil
}

// queueGenerationRecord queues a record that carries no revision of the journal (an
// erasure's, a redaction's) for the relay, and keeps it for a republish.
func (s *Service) queueGenerationRecord(b *pgx.Batch, env *events.Envelope) error {
	value, err := events.Encode(env)
	if err != nil {
		return fmt.Errorf("encode the %s record: %w", env.Type, err)
	}
	headers, err := json.Marshal(headerPairs(events.CloudEventHeaders(env, s.cfg.EventSource)))
	if err != nil {
		return err
	}
	key := events.RecordKey(env.Org, env.Namespace)
	outbox.Queue(b, outbox.Record{Org: env.Org, Namespace: env.Namespace, Seq: env.Seq, Topic: s.cfg.Topic,
		Key: key, Headers: headers, Value: value})
	b.Queue(`INSERT INTO loom.generation_records (org, namespace, seq, event_type, record_key, headers, value)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, env.Org, env.Namespace, env.Seq, string(env.Type), key, headers, value)
	return nil
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
