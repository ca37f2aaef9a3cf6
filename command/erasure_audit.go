package command

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/generations"
)

// An erasure saga's own audit rows (memory-architecture, "Erasure saga"):
// erasure.started, erasure.failed and erasure.completed name the request's actor (the
// ledger keeps it), on a resumed run too; erasure_recovery names itself on
// erasure.recovered and erasure.abandoned. Each is a record of the namespaces the saga
// fences, so the projector chains it in their audit trails like any other row:
// erasure.started rides the saga's memory.erased record (step 1, one transaction with
// the fence), the others a loom.audited record of their own at a new seq, queued in
// the transaction that records the transition in the ledger. A row names the saga,
// its status after the transition and the run; never the user it erases.

// erasureRecoveryActor is erasure_recovery's actor: a worker no token maps to.
const erasureRecoveryActor = "worker:erasure_recovery"

// sagaActor is who the saga's started, failed and completed rows name: the request's
// actor, or, for a ledger row an older build recorded without one, the process that
// runs it.
func sagaActor(sg *erasureSaga, attempt int) string {
	if sg.Actor != "" {
		return sg.Actor
	}
	if attempt > 1 {
		return erasureRecoveryActor
	}
	return "-"
}

// sagaAudit is one of a saga's audit rows before its seq is drawn.
type sagaAudit struct {
	op, actor, status, step string
	attempt                 int
}

// note is the audit note of a at seq.
func (a sagaAudit) note(sg *erasureSaga, seq int64) *events.AuditNote {
	return &events.AuditNote{Kind: events.AuditErasure, Op: a.op, Actor: a.actor, FirstSeq: seq, LastSeq: seq,
		Erasure: &events.AuditSaga{ID: sg.ID, Status: a.status, Attempt: a.attempt, Step: a.step}}
}

// auditNamespaces are the namespaces a saga's rows go to: those it fenced, and the
// ones its scope names (a saga that failed before its first fence). A user's erasure
// across the org that failed before step 1 has none yet: its failed and abandoned rows
// are the ledger's alone.
func (sg *erasureSaga) auditNamespaces() []string {
	set := map[string]bool{}
	for _, ns := range sg.Scope.Namespaces {
		set[ns] = true
	}
	for ns := range sg.Fences {
		set[ns] = true
	}
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// sagaAuditRow is one saga's audit row bound for one namespace.
type sagaAuditRow struct {
	sg    *erasureSaga
	ns    string
	audit sagaAudit
}

// queueSagaAudits draws a seq in each row's namespace, in (org, namespace) order so two
// transactions never wait on each other's namespaces, and queues its loom.audited
// record on b, in tx. A namespace never written has no generation and gets no row.
func (s *Service) queueSagaAudits(ctx context.Context, tx pgx.Tx, b *pgx.Batch, rows []sagaAuditRow) error {
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].sg.Org != rows[j].sg.Org {
			return rows[i].sg.Org < rows[j].sg.Org
		}
		return rows[i].ns < rows[j].ns
	})
	for _, r := range rows {
		seq, err := generations.Bump(ctx, tx, r.sg.Org, r.ns)
		if errors.Is(err, generations.ErrUnwritten) {
			continue
		}
		if err != nil {
			return fmt.Errorf("draw the seq of the %s row of erasure %s in %s: %w", r.audit.op, r.sg.ID, r.ns, err)
		}
		env := &events.Envelope{Version: events.EnvelopeVersion, ID: events.RecordID(r.sg.Org, r.ns, seq), Type: events.TypeAudited,
			Org: r.sg.Org, Namespace: r.ns, Seq: seq, CommittedAt: s.now().UTC(), Audit: r.audit.note(r.sg, seq)}
		if err := s.queueGenerationRecord(b, env, 0); err != nil {
			return err
		}
	}
	return nil
}

// sagaAuditRows is a's row in each of sg's namespaces.
func sagaAuditRows(sg *erasureSaga, a sagaAudit) []sagaAuditRow {
	var out []sagaAuditRow
	for _, ns := range sg.auditNamespaces() {
		out = append(out, sagaAuditRow{sg: sg, ns: ns, audit: a})
	}
	return out
}
