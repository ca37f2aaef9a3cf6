package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/reflections"
)

// The reflection_distill pass (memory-architecture, "Background passes": recent
// sessions without an outcome; outcome labels, then reflection memories hidden from
// unfiltered recall; off by default, LOOM_REFLECTION_DISTILL_ENABLED, and per namespace
// opt-in, its configuration's reflection_distill). A consumer of the topic, as the
// session_digest pass (due_passes.go): a memory.turns_observed record makes its
// namespace due, and the namespace's records are stamped done once none of its sessions
// has turns no label covers (given back due again after
// LOOM_REFLECTION_DISTILL_INTERVAL_MS, a minute at most, while one has: a session not yet
// quiet, a call that failed). Over the conversation's record: a user's session with a turn kept in the last
// LOOM_REFLECTION_DISTILL_MAX_AGE_DAYS, quiet for LOOM_REFLECTION_DISTILL_IDLE_SECONDS,
// whose last turn no label covers, owes an outcome. One model call (a JSON Schema
// answer, asked again while outside it, up to LOOM_REFLECTION_DISTILL_ATTEMPTS) reads
// its last LOOM_REFLECTION_DISTILL_MAX_TURNS turns and answers the outcome (achieved,
// failed, mixed, unclear) and up to five reflections: what to do again or differently.
// The label (loom.session_outcomes) and, when there are reflections, the session's
// reflection row (type reflection, key reflection:<session>, by
// worker:reflection_distill) are kept in one commit through the worker API
// (command.KeepReflection). The label's window end is the stamp: a pass killed before
// the commit leaves the session owed and nothing written, one after leaves it labelled,
// so a session is distilled once per new turns. Two processes' passes take a session
// under a Postgres advisory lock each, held across the model call, and read again
// under it that the session still owes the label, so a window is asked once
// (distillClaimed). A reflection row is searchable only by
// a search that asks for memory_type reflection (memrow.HiddenTypes).

const workerReflections = "reflection_distill"

// Ops of the reflection rows.
const opDistillReflection = "reflection.distill"

// maxReflections is how many reflections one session yields at most.
const maxReflections = 5

var reflectionDoc = map[string]any{
	"type": "object", "additionalProperties": false, "required": []string{"outcome", "reflections"},
	"properties": map[string]any{
		"outcome": map[string]any{"type": "string", "enum": reflections.Outcomes,
			"description": "Whether the session reached what the user came for: achieved, failed, mixed or unclear."},
		"reflections": map[string]any{"type": "array", "maxItems": maxReflections, "items": map[string]any{"type": "string"},
			"description": "Lessons for the agent's next sessions with this user: what worked and should be done again, or what failed and should be done differently. One short sentence each; none when there is nothing to learn."},
	},
}

var reflectionSchema = llm.MustSchema("reflection_distill", "A session's outcome and the lessons it holds.", reflectionDoc)

const reflectionRubric = `You review one finished conversation session between a user and an agent. Label its outcome: achieved (the user got what they came for), failed (they did not), mixed, or unclear. Then write the lessons it holds for the agent's next sessions with this user, only from what the turns show: what worked and should be done again, what failed and should be done differently. No lesson that merely restates a fact the user told.`

// reflectionValue is a reflection row's value.
type reflectionValue struct {
	Outcome     string   `json:"outcome"`
	Reflections []string `json:"reflections"`
}

// RunReflectionDistill runs the reflection_distill pass until ctx ends: woken by its
// feed, and every interval (a minute at most) for the namespaces whose sessions were
// not yet quiet.
func (s *Service) RunReflectionDistill(ctx context.Context) {
	cfg := s.cfg.ReflectionDistill
	s.runPasses(ctx, workerReflections, s.soon(workerReflections), cfg.MaxAge+24*time.Hour, s.reflectionPass)
}

// reflectionOwing is when a session owes an outcome now.
func (s *Service) reflectionOwing() reflections.Owing {
	cfg, now := s.cfg.ReflectionDistill, s.now()
	return reflections.Owing{Since: now.Add(-cfg.MaxAge), IdleBefore: now.Add(-cfg.Idle)}
}

// reflectionPass distils the owed sessions of the namespaces of a batch of records.
func (s *Service) reflectionPass(ctx context.Context) passResult {
	cfg := s.cfg.ReflectionDistill
	return s.dueNamespacePass(ctx, workerReflections, cfg.Batch, cfg.MaxAge, outcomeDistilled, false, s.distillNamespace)
}

// distillNamespace distils up to a batch of a namespace's owed sessions, one model call
// each, and answers errNotYet while a session of it has turns no label covers.
func (s *Service) distillNamespace(ctx context.Context, d dueNamespace) error {
	owing := s.reflectionOwing()
	owing.Org, owing.Namespace = d.org, d.namespace
	owed, err := reflections.OwedSessions(ctx, s.pool, owing, s.cfg.ReflectionDistill.Batch)
	if err != nil {
		return err
	}
	var failed error
	if len(owed) > 0 {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("no connection for the pass: %w", err)
		}
		defer conn.Release()
		for _, o := range owed {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			key := o.Org + "/" + o.Namespace + "/" + o.UserID + "/" + o.SessionID
			if s.reflectionWait[key].After(s.now()) {
				continue
			}
			err := s.distillClaimed(ctx, conn, key, o)
			switch {
			case err == nil, errors.Is(err, errClaimedElsewhere):
			case errors.Is(err, errStopped):
				return err
			default:
				if ctx.Err() == nil && !errors.Is(err, command.ErrOutcomeNotKept) {
					s.log.Warn("reflection_distill: a session stays owed", "org", o.Org, "namespace", o.Namespace, "err", err)
					// A provider's outage, a spent cap or answers outside the schema: later,
					// not every pass (ten passes, ten minutes at most).
					s.reflectionWait[key] = s.now().Add(min(10*s.cfg.ReflectionDistill.Interval, 10*time.Minute))
				}
				failed = err
			}
		}
	}
	if failed != nil {
		return failed
	}
	// Every session whose turns no label covers, quiet or not: the namespace is due
	// again until none is left.
	owing.IdleBefore = s.now().Add(100 * 365 * 24 * time.Hour)
	pending, err := reflections.CountOwed(ctx, s.pool, owing)
	if err != nil {
		return err
	}
	if pending > 0 {
		return notYet(s.soon(workerReflections))
	}
	return nil
}

// errClaimedElsewhere: another process holds the session, or labelled it since the
// pass read it owed.
var errClaimedElsewhere = errors.New("the session is distilled by another pass")

// distillClaimed distils a session under its claim: a Postgres advisory lock on conn,
// held across the model call until the label is committed, and under it a second
// read that the session still owes that label. Two processes' passes that both read
// the session owed thus make one model call, not two of which one commit is kept.
func (s *Service) distillClaimed(ctx context.Context, conn *pgxpool.Conn, key string, o reflections.Owed) error {
	lock := workerReflections + "/" + key
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, lock).Scan(&locked); err != nil {
		return fmt.Errorf("take the session's claim: %w", err)
	}
	if !locked {
		return errClaimedElsewhere
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, lock); err != nil {
			s.log.Warn("reflection_distill: releasing a session's claim failed", "err", err)
		}
	}()
	labelled, err := reflections.Labelled(ctx, conn, o)
	if err != nil {
		return err
	}
	if labelled {
		return errClaimedElsewhere
	}
	return s.distillSession(ctx, o)
}

// distillSession asks for one session's outcome and reflections and keeps them.
func (s *Service) distillSession(ctx context.Context, o reflections.Owed) error {
	scope := evidence.Scope{Org: o.Org, Namespace: o.Namespace, UserID: o.UserID}
	turns, err := evidence.Window(ctx, s.pool, scope, o.SessionID, o.LastIndex-s.cfg.ReflectionDistill.MaxTurns+1, o.LastIndex)
	if err != nil {
		return err
	}
	if len(turns) == 0 {
		return command.ErrOutcomeNotKept // a redaction took them since the read
	}
	last := turns[len(turns)-1].MessageIndex
	req := llm.Request{Bill: llm.Bill{Org: o.Org, Namespace: o.Namespace, Purpose: llm.PurposeReflectionDistill},
		Schema: reflectionSchema, MaxTokens: 1200,
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: reflectionRubric}, {Role: llm.RoleUser, Content: digestPrompt("", turns)}}}
	answer, _, err := s.askHeld(ctx, req, reflectionSchema, s.cfg.ReflectionDistill.Attempts)
	if err != nil {
		return err
	}
	var v reflectionValue
	if err := json.Unmarshal(answer, &v); err != nil {
		return fmt.Errorf("read the model's answer: %w", err)
	}
	kept := v.Reflections[:0]
	for _, r := range v.Reflections {
		if r != "" {
			kept = append(kept, r)
		}
	}
	v.Reflections = kept
	label := reflections.Outcome{Org: o.Org, Namespace: o.Namespace, UserID: o.UserID, SessionID: o.SessionID, WindowEnd: last,
		Outcome: v.Outcome, Reflections: len(v.Reflections), Model: s.models.Model(llm.PurposeReflectionDistill)}
	requestID := fmt.Sprintf("%s:%s/%s/%s", workerReflections, o.Namespace, o.UserID, o.SessionID)
	if len(v.Reflections) == 0 {
		return s.cmd.KeepReflection(ctx, label, nil, requestID)
	}
	row, err := s.reflectionRow(ctx, reflections.Identity(o.Org, o.Namespace, o.UserID, o.SessionID), v)
	if err != nil {
		return err
	}
	return s.cmd.KeepReflection(ctx, label, row, requestID)
}

// reflectionRow is the new version of a session's reflection row over its head,
// embedded so a search for reflections finds it.
func (s *Service) reflectionRow(ctx context.Context, id memrow.Identity, v reflectionValue) (*command.WorkerRow, error) {
	head, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return nil, fmt.Errorf("read the session's reflection row: %w", err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	value, err := memrow.Canonical("value", raw)
	if err != nil {
		return nil, err
	}
	now := s.now()
	row := &memrow.Row{Identity: id, MemoryID: uuid.NewString(), MemoryType: reflections.MemoryType, Status: memrow.StatusActive,
		Entities: []string{}, Tags: []string{"outcome:" + v.Outcome}, Confidence: 1, SourceClass: command.SourceDerived,
		Sensitivity: memrow.SensitivityNormal, Actor: reflections.Actor, CreatedAt: now, UpdatedAt: now,
		Value: value, ContentSHA256: memrow.ContentSHA256(value)}
	w := &command.WorkerRow{Op: opDistillReflection, Event: events.TypeWritten, Row: row}
	if head != nil {
		w.ReadVersion, w.ReadSeq = head.Version, head.Seq
		if head.Live(now) {
			row.MemoryID, row.CreatedAt, w.Event = head.MemoryID, head.CreatedAt, events.TypeRevised
		}
	}
	row.Version = memrow.NextVersion(now, w.ReadVersion)
	if err := s.cmd.EmbedWorkerRow(ctx, w); err != nil {
		return nil, fmt.Errorf("embed the reflection row: %w", err)
	}
	return w, nil
}
