package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/periodic"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/watermarks"
)

// An erasure saga runs four steps, each idempotent and checkpointed in its ledger row:
//
//  1. postgres: one transaction advances each affected namespace's generation (its
//     fence), deletes the scope's heads, revisions, data keys, unpublished records,
//     parked search pages and the idempotency answers that name them, records the
//     deletion evidence, and queues one memory.erased record per namespace.
//  2. quiet: waits out the publishers that read the scope's records or keys before
//     step 1 committed (a relay round, a projector batch; pg.LockPublishers).
//  3. clickhouse: waits until the serving projection has applied every fence (its
//     watermark reached the memory.erased record); once a census re-opened it, the
//     saga applies the fences to ClickHouse itself.
//  4. census: counts every counted table of both stores over the scope; any residue
//     re-opens the step that owns the table, and the saga runs on from there.
//
// A run holds the saga under a lease and an attempt number; erasure_recovery takes
// over a saga whose lease lapsed with the next attempt number, which fences the run it
// replaced: every checkpoint names its attempt.

const (
	sagaRunning   = "running"
	sagaCompleted = "completed"
	sagaFailed    = "failed"

	stepPostgres   = "postgres"
	stepQuiet      = "quiet"
	stepClickHouse = "clickhouse"
	stepCensus     = "census"
)

func sagaSteps() []string { return []string{stepPostgres, stepQuiet, stepClickHouse, stepCensus} }

// maxSagaRounds bounds the steps one run takes, re-opened ones included.
const maxSagaRounds = 16

// errSagaTakenOver stops a run whose saga another run took over.
var errSagaTakenOver = errors.New("erasure_recovery took the saga over")

// erasureSaga is one loom.erasure_ledger row.
type erasureSaga struct {
	Org, ID      string
	Scope        erasureScope
	Purge        bool
	Actor        string
	Status       string
	Steps        map[string]time.Time
	Reopened     map[string]int
	Fences       map[string]int64
	Removed      map[string]int64
	Attempts     int
	LastError    string
	Residue      map[string]int64
	ResidueCount *int64
	Census       map[string]int64
	RequestedAt  time.Time
	VerifiedAt   *time.Time
	FinishedAt   *time.Time
}

// sagaState is what the steps and reopen counts are stored as, in the steps column.
type sagaState struct {
	Done     map[string]time.Time `json:"done"`
	Reopened map[string]int       `json:"reopened,omitempty"`
}

func (sg *erasureSaga) state() sagaState { return sagaState{Done: sg.Steps, Reopened: sg.Reopened} }

// next is the first step not done.
func (sg *erasureSaga) next() string {
	for _, step := range sagaSteps() {
		if _, ok := sg.Steps[step]; !ok {
			return step
		}
	}
	return ""
}

// fences are the saga's namespace fences, once step 1 drew them.
func (sg *erasureSaga) fences() []erasure.Fence {
	var out []erasure.Fence
	for ns, seq := range sg.Fences {
		out = append(out, erasure.Fence{Org: sg.Org, Namespace: ns, UserID: sg.Scope.UserID, Seq: seq, Purge: sg.Purge})
	}
	return out
}

// runSaga runs a saga as attempt until it completes, a step fails, or a fault stops
// it. A failed step keeps the saga running: recovery runs it again once its lease
// lapsed, and marks it failed after LOOM_ERASURE_MAX_ATTEMPTS runs.
func (s *Service) runSaga(ctx context.Context, org, id string, attempt int) error {
	for round := 0; round < maxSagaRounds; round++ {
		sg, err := s.loadSaga(ctx, org, id)
		if err != nil {
			return fmt.Errorf("read erasure %s: %w", id, err)
		}
		if sg.Status != sagaRunning {
			return nil
		}
		if sg.Attempts != attempt {
			return errSagaTakenOver
		}
		step := sg.next()
		sctx, cancel := context.WithTimeout(ctx, s.cfg.Erasure.StepTimeout)
		stopRenewing := s.renewLease(sctx, cancel, sg, attempt)
		err = s.runStep(sctx, sg, step, attempt)
		stopRenewing()
		cancel()
		if err != nil {
			if !errors.Is(err, errSagaTakenOver) {
				s.noteSagaError(ctx, sg, attempt, step, err)
			}
			return fmt.Errorf("erasure %s step %s: %w", id, step, err)
		}
		if f := s.faults; f != nil && f.AfterErasureStep != nil {
			if err := f.AfterErasureStep(step); err != nil {
				return fmt.Errorf("erasure %s stopped after step %s: %w", id, step, err)
			}
		}
	}
	return fmt.Errorf("erasure %s: residue persists after %d steps", id, maxSagaRounds)
}

func (s *Service) runStep(ctx context.Context, sg *erasureSaga, step string, attempt int) error {
	switch step {
	case stepPostgres:
		return s.erasePostgres(ctx, sg, attempt)
	case stepQuiet:
		if err := pg.WaitOut(ctx, s.pool, pg.LockPublishers); err != nil {
			return fmt.Errorf("wait out the publishers: %w", err)
		}
		if err := s.markErasedQuiet(ctx, sg.ID); err != nil {
			return fmt.Errorf("record when the erasure's publishers were quiet: %w", err)
		}
	case stepClickHouse:
		if err := s.eraseClickHouse(ctx, sg); err != nil {
			return err
		}
	case stepCensus:
		return s.verifyErasure(ctx, sg, attempt)
	default:
		return fmt.Errorf("no step %q", step)
	}
	sg.Steps[step] = s.now().UTC()
	return s.checkpoint(ctx, sg, attempt)
}

// eraseClickHouse is step 3. The projector applies a memory.erased record when it
// reaches it, before its watermark passes the record, so the step waits for the
// serving projection's watermark at every fence. A census that found residue re-opens
// the step, and the saga then applies the fences itself: the projection has passed
// them and will not again.
func (s *Service) eraseClickHouse(ctx context.Context, sg *erasureSaga) error {
	if sg.Reopened[stepClickHouse] > 0 {
		return erasure.Erase(ctx, s.ch, sg.fences())
	}
	if behind, err := s.waitProjected(ctx, sg.Org, sg.Fences); err != nil {
		return fmt.Errorf("the projection %q has not applied the erasure in %d namespaces: %w", s.cfg.Projection, behind, err)
	}
	return nil
}

// waitProjected waits until the serving projection's watermark of each namespace
// reaches its seq, polling, until ctx ends; it returns how many were still behind.
func (s *Service) waitProjected(ctx context.Context, org string, seqs map[string]int64) (behind int, err error) {
	for {
		behind = 0
		for ns, seq := range seqs {
			wm, err := watermarks.Read(ctx, s.pool, s.cfg.Projection, org, ns)
			if err != nil {
				return len(seqs), fmt.Errorf("read the watermark of %s: %w", ns, err)
			}
			if wm < seq {
				behind++
			}
		}
		if behind == 0 {
			return 0, nil
		}
		select {
		case <-ctx.Done():
			return behind, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// renewLease keeps a run's lease while its step runs (a step may wait longer than the
// lease, for a projection that is behind), so erasure_recovery takes over only a run
// that stopped. A renewal that finds the saga taken over cancels the step. The
// returned func stops renewing.
func (s *Service) renewLease(ctx context.Context, cancel context.CancelFunc, sg *erasureSaga, attempt int) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(max(s.cfg.Erasure.Lease/3, 10*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			held, err := s.renewSagaLease(ctx, sg, attempt)
			if err == nil && !held {
				s.log.Warn("erasure_recovery took the saga over while its step ran; stopping this run", "erasure_id", sg.ID, "attempt", attempt)
				cancel()
				return
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// checkpoint stores the saga's steps under its attempt, and renews its lease: a run
// recovery took over stores nothing and stops.
func (s *Service) checkpoint(ctx context.Context, sg *erasureSaga, attempt int) error {
	raw, err := json.Marshal(sg.state())
	if err != nil {
		return err
	}
	held, err := s.storeSagaSteps(ctx, sg, attempt, raw)
	if err != nil {
		return fmt.Errorf("checkpoint erasure %s: %w", sg.ID, err)
	}
	if !held {
		return errSagaTakenOver
	}
	return nil
}

// noteSagaError records why a run stopped, with the saga's erasure.failed row naming
// the step (not the error, which the ledger keeps); the saga stays running for
// recovery.
func (s *Service) noteSagaError(ctx context.Context, sg *erasureSaga, attempt int, step string, cause error) {
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := pg.InTx(nctx, s.pool, func(tx pgx.Tx) error {
		held, err := storeSagaError(nctx, tx, sg, attempt, step+": "+cause.Error())
		if err != nil || !held {
			return err
		}
		failed := sagaAudit{op: events.OpErasureFailed, actor: sagaActor(sg, attempt), status: sagaRunning, attempt: attempt, step: step}
		return s.sendSagaAudits(nctx, tx, sagaAuditRows(sg, failed))
	})
	if err != nil {
		s.log.Warn("erasure: cannot record a step's failure", "erasure", sg.ID, "err", err)
	}
}

// sendSagaAudits queues rows' records in tx and wakes the relay.
func (s *Service) sendSagaAudits(ctx context.Context, tx pgx.Tx, rows []sagaAuditRow) error {
	if len(rows) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if err := s.queueSagaAudits(ctx, tx, b, rows); err != nil {
		return err
	}
	outbox.QueueNotify(b)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("queue the erasure's audit records: %w", err)
	}
	return nil
}

// verifyErasure is step 4, the residue census. With no residue the saga completes;
// otherwise each table's owning step is re-opened (Postgres tables: the whole saga
// from step 1, with new fences; ClickHouse tables: step 3, applied by the saga) and
// the census runs again after it.
func (s *Service) verifyErasure(ctx context.Context, sg *erasureSaga, attempt int) error {
	census, err := s.census(ctx, sg)
	if err != nil {
		return err
	}
	residue := map[string]int64{}
	var total int64
	reopen := ""
	for key, n := range census {
		if n == 0 {
			continue
		}
		residue[key] = n
		total += n
		switch owner := ownerOf(key); {
		case owner == stepPostgres:
			reopen = stepPostgres
		case reopen == "":
			reopen = owner
		}
	}
	rawCensus, _ := json.Marshal(census)
	rawResidue, _ := json.Marshal(residue)
	if reopen != "" {
		sg.Reopened[reopen]++
		for _, step := range stepsFrom(reopen) {
			delete(sg.Steps, step)
		}
	} else {
		sg.Steps[stepCensus] = s.now().UTC()
	}
	rawState, err := json.Marshal(sg.state())
	if err != nil {
		return err
	}
	status := sagaRunning
	if reopen == "" {
		status = sagaCompleted
	}
	var held bool
	err = pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		held, err = s.storeSagaCensus(ctx, tx, sg, attempt, sagaCensus{state: rawState, census: rawCensus, residue: rawResidue,
			total: total, status: status})
		if err != nil || !held || status != sagaCompleted {
			return err
		}
		completed := sagaAudit{op: events.OpErasureCompleted, actor: sagaActor(sg, attempt), status: sagaCompleted, attempt: attempt}
		return s.sendSagaAudits(ctx, tx, sagaAuditRows(sg, completed))
	})
	if err != nil {
		return fmt.Errorf("record the census of erasure %s: %w", sg.ID, err)
	}
	if !held {
		return errSagaTakenOver
	}
	if reopen != "" {
		s.log.Warn("erasure: the census found residue; re-opening its step", "erasure", sg.ID, "step", reopen, "residue", residue)
	}
	return nil
}

// ownerOf is the step that clears a census table.
func ownerOf(key string) string {
	if len(key) > 3 && key[:3] == erasure.Postgres+":" {
		return stepPostgres
	}
	return stepClickHouse
}

// stepsFrom lists step and every step after it.
func stepsFrom(step string) []string {
	all := sagaSteps()
	for i, s := range all {
		if s == step {
			return all[i:]
		}
	}
	return nil
}

// RunErasureRecovery is erasure_recovery: every interval it takes over the sagas whose
// runner stopped (their lease lapsed) and runs them, and marks failed those that ran
// LOOM_ERASURE_MAX_ATTEMPTS times. Every process with the command role runs it; a
// saga is taken by one of them at a time (SKIP LOCKED, then its attempt number).
func (s *Service) RunErasureRecovery(ctx context.Context, interval time.Duration) {
	periodic.Every(ctx, interval, func() {
		if err := s.recoverErasures(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("erasure_recovery: pass failed", "err", err)
		}
	})
}

// recoverErasures is one pass of erasure_recovery.
func (s *Service) recoverErasures(ctx context.Context) error {
	if err := s.recoverTransition(ctx, s.failAbandonedSagas, events.OpErasureAbandoned, sagaFailed); err != nil {
		return fmt.Errorf("mark abandoned erasures failed: %w", err)
	}
	var claims []sagaClaim
	claim := func(ctx context.Context, tx pgx.Tx) (out []sagaClaim, err error) {
		claims, err = s.claimStoppedSagas(ctx, tx)
		return claims, err
	}
	if err := s.recoverTransition(ctx, claim, events.OpErasureRecovered, sagaRunning); err != nil {
		return fmt.Errorf("take over stopped erasures: %w", err)
	}
	for _, c := range claims {
		s.log.Info("erasure_recovery: resuming a saga", "erasure", c.id, "org", c.org, "attempt", c.attempt)
		rctx, cancel := context.WithTimeout(ctx, s.cfg.Erasure.Lease)
		err := s.runSaga(rctx, c.org, c.id, c.attempt)
		cancel()
		if err != nil && ctx.Err() == nil {
			s.log.Warn("erasure_recovery: the saga stopped again", "erasure", c.id, "err", err)
		}
	}
	return nil
}

// sweepErasures deletes deletion evidence past LOOM_PG_ERASURE_EVIDENCE_HOURS (a
// refusal judges its age itself and never waits for this) and finished sagas past
// LOOM_ERASURE_LEDGER_DAYS.
func (s *Service) sweepErasures(ctx context.Context) error {
	if err := s.sweepErasedEvidence(ctx); err != nil {
		return fmt.Errorf("sweep deletion evidence: %w", err)
	}
	if err := s.sweepSagas(ctx); err != nil {
		return fmt.Errorf("sweep the erasure ledger: %w", err)
	}
	return nil
}

// recoverTransition runs one of erasure_recovery's ledger changes (a take-over, or the
// abandoning of a saga out of runs) in one transaction with the row it leaves in each
// saga's namespaces (op, naming erasure_recovery, the saga's status after it).
func (s *Service) recoverTransition(ctx context.Context, change func(context.Context, pgx.Tx) ([]sagaClaim, error), op, status string) error {
	return pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		claims, err := change(ctx, tx)
		if err != nil {
			return err
		}
		var rows []sagaAuditRow
		for _, c := range claims {
			// Read apart from tx: the saga's scope and fences, which the change left.
			sg, err := s.loadSaga(ctx, c.org, c.id)
			if err != nil {
				return fmt.Errorf("read erasure %s: %w", c.id, err)
			}
			rows = append(rows, sagaAuditRows(sg, sagaAudit{op: op, actor: erasureRecoveryActor, status: status, attempt: c.attempt})...)
		}
		return s.sendSagaAudits(ctx, tx, rows)
	})
}
