package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/contentkey"
	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/extractqueue"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
)

// erasePostgres is the saga's step 1, one transaction. Advancing each namespace's
// generation takes its lock, so the namespace's commits wait for the erasure, and its
// new generation is the fence: every row of the scope below it goes, and a write built
// from a head read before it is refused at its commit (the deletion evidence). The
// ledger row is locked first, so a step that committed never runs twice.
//
// Deleting a user's name changes what the tokens bound to the user authenticate as
// (auth.ErasedUser), and ending a session's last rows what the tokens bound to it alone
// do (auth.ErasedSession: erasure_session_tokens.go), so the step then notifies every
// process to empty its token cache and empties this one's once it committed.
func (s *Service) erasePostgres(ctx context.Context, sg *erasureSaga, attempt int) error {
	tokensChanged := false
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		tokensChanged = false
		sessions := map[string]bool{} // of session-bound tokens, holding rows of the scope
		raw, current, err := lockSagaSteps(ctx, tx, sg)
		if err != nil {
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
		tokens, err := readSessionTokens(ctx, tx, sg.Org)
		if err != nil {
			return err
		}
		// The saga's first fences carry its erasure.started row; a census that re-opens
		// the step draws new ones, which do not.
		var started *sagaAudit
		if len(sg.Fences) == 0 {
			started = &sagaAudit{op: events.OpErasureStarted, actor: sagaActor(sg, attempt), status: sagaRunning, attempt: attempt}
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
			if err := tokens.inScope(ctx, tx, sg.Org, ns, sg.Scope.UserID, sessions); err != nil {
				return err
			}
			counts, err := s.eraseNamespace(ctx, tx, sg, ns, gen, started)
			if err != nil {
				return err
			}
			for k, v := range counts {
				removed[k] += v
			}
			tokensChanged = tokensChanged || counts[userNamesTable] > 0
			fences[ns] = gen
		}
		if sg.Scope.Kind == scopeUserInOrg {
			n, err := eraseUserName(ctx, tx, sg.Org, sg.Scope.UserID, sg.ID)
			if err != nil {
				return err
			}
			removed[userNamesTable] += n
			tokensChanged = tokensChanged || n > 0
		}
		ended, err := tokens.end(ctx, tx, sg.Org, sessions)
		if err != nil {
			return err
		}
		tokensChanged = tokensChanged || ended > 0
		sg.Fences, sg.Removed = fences, removed
		sg.Steps[stepPostgres] = s.now().UTC()
		rawState, _ := json.Marshal(sg.state())
		rawFences, _ := json.Marshal(fences)
		rawRemoved, _ := json.Marshal(removed)
		b := &pgx.Batch{}
		s.queueStorePostgresStep(b, sg, rawState, rawFences, rawRemoved)
		outbox.QueueNotify(b)
		if tokensChanged {
			auth.QueueForgetCached(b, "erasure "+sg.ID)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("checkpoint the Postgres step: %w", err)
		}
		return nil
	})
	if err == nil && tokensChanged && s.tokens != nil {
		s.tokens.ForgetCached()
	}
	return err
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
		// Each table's owner reads its part, in one round trip; the set is their union.
		var journal, current, requests, turns, documents []string
		b := &pgx.Batch{}
		queueNamespacesOfUser(b, sg.Org, sg.Scope.UserID, &journal)
		queueKnowledgeNamespacesOfUser(b, sg.Org, sg.Scope.UserID, &documents)
		heads.QueueNamespacesOfUser(b, sg.Org, sg.Scope.UserID, &current)
		extractqueue.QueueNamespacesOfUser(b, sg.Org, sg.Scope.UserID, &requests)
		evidence.QueueNamespacesOfUser(b, sg.Org, sg.Scope.UserID, &turns)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, fmt.Errorf("find the user's namespaces: %w", err)
		}
		for _, found := range [][]string{journal, current, requests, turns, documents} {
			for _, ns := range found {
				set[ns] = true
			}
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
// the evidence, and queues the namespace's memory.erased record, carrying started's
// row when set. It returns what it removed, by kind.
func (s *Service) eraseNamespace(ctx context.Context, tx pgx.Tx, sg *erasureSaga, ns string, fence int64, started *sagaAudit) (map[string]int64, error) {
	args := []any{sg.Org, ns, sg.Scope.UserID, fence, sg.ID}
	counts := map[string]int64{}
	ids := map[string]bool{}
	for _, step := range []struct {
		table string
		erase func(context.Context, pgx.Tx, []any) ([]string, error)
	}{{headsTable, eraseHeads}, {revisionsTable, eraseRevisions}} {
		table := step.table
		removed, err := step.erase(ctx, tx, args)
		if err != nil {
			return nil, fmt.Errorf("erase %s of %s: %w", table, ns, err)
		}
		for _, id := range removed {
			ids[id] = true
		}
		counts[table] = int64(len(removed))
	}
	n, err := eraseEntityAliases(ctx, tx, args)
	if err != nil {
		return nil, fmt.Errorf("erase the entity aliases of %s: %w", ns, err)
	}
	counts["loom.entity_aliases"] = n
	if n, err = eraseShared(ctx, tx, args); err != nil {
		return nil, fmt.Errorf("erase the promotions of %s: %w", ns, err)
	}
	counts[sharedTable] = n
	if n, err = eraseDecisionRecords(ctx, tx, args); err != nil {
		return nil, fmt.Errorf("erase the decision records of %s: %w", ns, err)
	}
	counts[decisionRecordsTable] = n
	if n, err = eraseCategoryLinks(ctx, tx, args); err != nil {
		return nil, fmt.Errorf("erase the category links of %s: %w", ns, err)
	}
	counts[categoryLinksTable] = n
	if n, err = eraseAllowedPairs(ctx, tx, args); err != nil {
		return nil, fmt.Errorf("erase the allowlisted pairs of %s: %w", ns, err)
	}
	counts[conflictAllowlistTable] = n
	// The keys go after their revisions: a user's keys are those left without one.
	if n, err = destroyScopeKeys(ctx, tx, args); err != nil {
		return nil, fmt.Errorf("destroy the data keys of %s: %w", ns, err)
	}
	counts["loom.revision_keys"] = n
	destroyed, err := destroyContentKeys(ctx, tx, args)
	if err != nil {
		return nil, fmt.Errorf("destroy the content hash keys of %s: %w", ns, err)
	}
	counts[contentKeysTable] = int64(len(destroyed))
	for _, user := range destroyed {
		// Forgotten at once here; other processes' entries expire by their TTL and are
		// never used against another key meanwhile (contentHashSQL).
		s.contentKeys.Forget(contentkey.Scope{Org: sg.Org, Namespace: ns, UserRef: user})
	}
	// A parked row's seq was published as a placeholder already: it is not withdrawn.
	deleted, withdrawn, err := outbox.Withdraw(ctx, tx, erasure.ScopeParams, pgScope("loom.outbox"), args...)
	if err != nil {
		return nil, fmt.Errorf("withdraw the unpublished records of %s: %w", ns, err)
	}
	counts["loom.outbox"] = deleted
	list := make([]string, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	b := &pgx.Batch{}
	queueRecordErased(b, sg.Org, ns, list, sg.ID)
	queueRecordErasedDocuments(b, args)
	// The answers naming an erased memory are fenced: a new token, so a request still
	// holding the key stores no answer, and a retry answers 404 for the whole request.
	var fenced int64
	idempotency.QueueFenceErased(b, args, &fenced)
	// Parked pages and kept search traces name the scope's keys; deferred extractions go
	// with their sealed transcripts and keys.
	queueEraseDerived(b, args, counts)
	kind, userRef, refGen := events.ErasureScopeNamespace, "", 0
	if sg.Scope.UserID != "" {
		kind = events.ErasureScopeUser
		if userRef, refGen, err = s.userRefs.CurrentRef(ctx, sg.Org, sg.Scope.UserID); err != nil {
			return nil, err
		}
	}
	env := &events.Envelope{Version: events.EnvelopeVersion, ID: events.RecordID(sg.Org, ns, fence), Type: events.TypeErased,
		Org: sg.Org, Namespace: ns, Seq: fence, CommittedAt: s.now().UTC(),
		Erasure: &events.Erasure{ID: sg.ID, Scope: kind, UserRef: userRef, Purge: sg.Purge, Generation: fence, Withdrawn: withdrawn}}
	if started != nil {
		env.Audit = started.note(sg, fence)
	}
	if err := s.queueGenerationRecord(b, env, refGen); err != nil {
		return nil, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("record the erasure of %s: %w", ns, err)
	}
	counts["loom.idempotency"] = fenced
	counts["memories"] = int64(len(list))
	counts["withdrawn"] = withdrawn
	return counts, nil
}

// queueGenerationRecord queues a record that carries no revision of the journal (an
// erasure's, a redaction's) for the relay, and keeps it for a republish. refGen is the
// generation of the user reference key its references were made under (0: it names
// no one by reference).
func (s *Service) queueGenerationRecord(b *pgx.Batch, env *events.Envelope, refGen int) error {
	value, err := events.Encode(env)
	if err != nil {
		return fmt.Errorf("encode the %s record: %w", env.Type, err)
	}
	return s.queueEncodedRecord(b, env, value, refGen)
}

// queueEncodedRecord queues an encoded record that carries no revision for the relay
// and keeps it in generation_records for a republish.
func (s *Service) queueEncodedRecord(b *pgx.Batch, env *events.Envelope, value []byte, refGen int) error {
	headers, err := json.Marshal(headerPairs(append(events.CloudEventHeaders(env, s.cfg.EventSource), events.RefGenerationHeader(refGen)...)))
	if err != nil {
		return err
	}
	key := events.RecordKey(env.Org, env.Namespace)
	outbox.Queue(b, outbox.Record{Org: env.Org, Namespace: env.Namespace, Seq: env.Seq, Topic: s.cfg.Topic,
		Key: key, Headers: headers, Value: value})
	queueKeepGenerationRecord(b, env.Org, env.Namespace, env.Seq, string(env.Type), key, headers, value)
	return nil
}
