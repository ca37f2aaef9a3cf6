package command

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/heads"
)

// The statements of loom.erasure_ledger, one row per erasure saga: its record
// (erasure.go), the steps' checkpoints under the run's attempt and lease
// (erasure_saga.go, erasure_postgres.go), erasure_recovery's take-over and the sweep.
// The commit's read of the ledger's fences is erased_store.go's (it joins the
// evidence). The workers read whether an erasure runs through Service.ErasureRunning
// (workerapi.go).

// insertSaga records a saga, running under a lease from now, in tx. Its scope names
// the user by reference, the id sealed (loom.ledger_scope, migration 155): the org's
// key is made first.
func (s *Service) insertSaga(ctx context.Context, tx pgx.Tx, org, id string, scope []byte, purge bool, actor string) error {
	if _, err := s.userRefs.Key(ctx, org); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO loom.erasure_ledger (org, id, scope, purge, actor, status, lease_until, requested_at)
			VALUES ($1, $2, loom.ledger_scope($1, $3::jsonb), $4, $5, 'running', now() + $6::interval, clock_timestamp())`, org, id, scope, purge, actor,
		s.cfg.Erasure.Lease.String())
	return err
}

func (s *Service) loadSaga(ctx context.Context, org, id string) (*erasureSaga, error) {
	sg := &erasureSaga{Org: org, ID: id}
	var scope, steps, fences, removed, residue, census []byte
	var lastError *string
	var user string
	err := s.pool.QueryRow(ctx, `SELECT scope, loom.ledger_user(org, scope), purge, actor, status, steps, fences, removed, attempts, last_error,
			residue, residue_count, census, requested_at, verified_at, finished_at
		FROM loom.erasure_ledger WHERE org = $1 AND id = $2`, org, id).
		Scan(&scope, &user, &sg.Purge, &sg.Actor, &sg.Status, &steps, &fences, &removed, &sg.Attempts, &lastError,
			&residue, &sg.ResidueCount, &census, &sg.RequestedAt, &sg.VerifiedAt, &sg.FinishedAt)
	if err != nil {
		return nil, err
	}
	if lastError != nil {
		sg.LastError = *lastError
	}
	var st sagaState
	for _, f := range []struct {
		raw []byte
		to  any
	}{{scope, &sg.Scope}, {steps, &st}, {fences, &sg.Fences}, {removed, &sg.Removed}, {residue, &sg.Residue}, {census, &sg.Census}} {
		if len(f.raw) > 0 {
			if err := json.Unmarshal(f.raw, f.to); err != nil {
				return nil, fmt.Errorf("decode erasure %s: %w", id, err)
			}
		}
	}
	sg.Scope.UserID = user // the scope names the user by reference; the saga works with the id
	sg.Steps, sg.Reopened = st.Done, st.Reopened
	if sg.Steps == nil {
		sg.Steps = map[string]time.Time{}
	}
	if sg.Reopened == nil {
		sg.Reopened = map[string]int{}
	}
	return sg, nil
}

// lockSagaSteps locks a saga's row in tx and reads its steps and attempts.
func lockSagaSteps(ctx context.Context, tx pgx.Tx, sg *erasureSaga) (steps []byte, attempts int, err error) {
	err = tx.QueryRow(ctx, `SELECT steps, attempts FROM loom.erasure_ledger WHERE org = $1 AND id = $2 FOR UPDATE`,
		sg.Org, sg.ID).Scan(&steps, &attempts)
	return steps, attempts, err
}

// queueStorePostgresStep queues the checkpoint of step 1: the steps, the fences drawn
// and the rows removed, with a renewed lease.
func (s *Service) queueStorePostgresStep(b *pgx.Batch, sg *erasureSaga, state, fences, removed []byte) {
	b.Queue(`UPDATE loom.erasure_ledger SET steps = $3, fences = $4, removed = $5, last_error = NULL,
			lease_until = now() + $6::interval, updated_at = now() WHERE org = $1 AND id = $2`,
		sg.Org, sg.ID, state, fences, removed, s.cfg.Erasure.Lease.String())
}

// renewSagaLease renews a running saga's lease under attempt; held is false once
// another run took the saga over.
func (s *Service) renewSagaLease(ctx context.Context, sg *erasureSaga, attempt int) (held bool, err error) {
	tag, err := s.pool.Exec(ctx, `UPDATE loom.erasure_ledger SET lease_until = now() + $4::interval
				WHERE org = $1 AND id = $2 AND attempts = $3 AND status = 'running'`,
		sg.Org, sg.ID, attempt, s.cfg.Erasure.Lease.String())
	return tag.RowsAffected() > 0, err
}

// storeSagaSteps stores a running saga's steps under attempt and renews its lease;
// held is false once another run took the saga over.
func (s *Service) storeSagaSteps(ctx context.Context, sg *erasureSaga, attempt int, state []byte) (held bool, err error) {
	tag, err := s.pool.Exec(ctx, `UPDATE loom.erasure_ledger SET steps = $4, last_error = NULL,
			lease_until = now() + $5::interval, updated_at = now()
		WHERE org = $1 AND id = $2 AND attempts = $3 AND status = 'running'`,
		sg.Org, sg.ID, attempt, state, s.cfg.Erasure.Lease.String())
	return tag.RowsAffected() > 0, err
}

// storeSagaError records why attempt's run stopped, in tx; held is false once another
// run took the saga over or it finished.
func storeSagaError(ctx context.Context, tx pgx.Tx, sg *erasureSaga, attempt int, lastError string) (held bool, err error) {
	tag, err := tx.Exec(ctx, `UPDATE loom.erasure_ledger SET last_error = $4, updated_at = now()
		WHERE org = $1 AND id = $2 AND attempts = $3 AND status = 'running'`, sg.Org, sg.ID, attempt, lastError)
	return tag.RowsAffected() > 0, err
}

// sagaCensus is what a residue census stores: the steps (re-opened ones removed), the
// census and residue by table, the residue's total and the saga's status after it.
type sagaCensus struct {
	state, census, residue []byte
	total                  int64
	status                 string
}

// storeSagaCensus stores a census under attempt, in tx, finishing the saga unless it
// runs on; held is false once another run took the saga over.
func (s *Service) storeSagaCensus(ctx context.Context, tx pgx.Tx, sg *erasureSaga, attempt int, c sagaCensus) (held bool, err error) {
	tag, err := tx.Exec(ctx, `UPDATE loom.erasure_ledger SET steps = $4, census = $5, residue = $6, residue_count = $7,
			status = $8, verified_at = now(), finished_at = CASE WHEN $8 = 'running' THEN NULL ELSE now() END,
			last_error = NULL, lease_until = now() + $9::interval, updated_at = now()
		WHERE org = $1 AND id = $2 AND attempts = $3 AND status = 'running'`,
		sg.Org, sg.ID, attempt, c.state, c.census, c.residue, c.total, c.status, s.cfg.Erasure.Lease.String())
	return tag.RowsAffected() > 0, err
}

// sagaClaim is a saga erasure_recovery took over under its next attempt, or marked
// failed after its last.
type sagaClaim struct {
	org, id string
	attempt int
}

// failAbandonedSagas marks failed, in tx, the sagas whose lease lapsed after
// LOOM_ERASURE_MAX_ATTEMPTS runs, and returns them.
func (s *Service) failAbandonedSagas(ctx context.Context, tx pgx.Tx) ([]sagaClaim, error) {
	rows, err := tx.Query(ctx, `UPDATE loom.erasure_ledger SET status = 'failed', finished_at = now(), updated_at = now(),
			last_error = coalesce(last_error, 'abandoned') || ' (abandoned after ' || attempts || ' runs)'
		WHERE status = 'running' AND lease_until < now() AND attempts >= $1
		RETURNING org, id::text, attempts`, s.cfg.Erasure.MaxAttempts)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanSagaClaim)
}

func scanSagaClaim(r pgx.CollectableRow) (sagaClaim, error) {
	var c sagaClaim
	err := r.Scan(&c.org, &c.id, &c.attempt)
	return c, err
}

// claimStoppedSagas takes over, in tx, up to 10 running sagas whose lease lapsed and
// that have runs left, each under its next attempt and a new lease; a saga another
// process is taking is skipped. A saga out of runs is failAbandonedSagas's even when its
// lease lapsed between the two statements.
func (s *Service) claimStoppedSagas(ctx context.Context, tx pgx.Tx) ([]sagaClaim, error) {
	rows, err := tx.Query(ctx, `UPDATE loom.erasure_ledger l SET attempts = l.attempts + 1,
			lease_until = now() + $1::interval, updated_at = now()
		FROM (SELECT org, id FROM loom.erasure_ledger WHERE status = 'running' AND lease_until < now() AND attempts < $2
			ORDER BY lease_until LIMIT 10 FOR UPDATE SKIP LOCKED) due
		WHERE l.org = due.org AND l.id = due.id
		RETURNING l.org, l.id::text, l.attempts`, s.cfg.Erasure.Lease.String(), s.cfg.Erasure.MaxAttempts)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanSagaClaim)
}

// sweepSagas deletes the finished sagas past LOOM_ERASURE_LEDGER_DAYS.
func (s *Service) sweepSagas(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM loom.erasure_ledger WHERE status <> 'running' AND requested_at < now() - $1::interval`,
		s.cfg.Erasure.LedgerKeep.String())
	return err
}

// erasureRunning reports whether an erasure of the org is running.
func erasureRunning(ctx context.Context, q heads.Querier, org string) (bool, error) {
	var running bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loom.erasure_ledger WHERE org = $1 AND status = 'running')`, org).Scan(&running)
	return running, err
}
