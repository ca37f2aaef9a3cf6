package workers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/llm"
)

// The session_digest pass (memory-architecture, "The extraction also writes its
// inputs": session_summaries, a session digest): a consumer of the topic
// (due_passes.go) for which a memory.turns_observed record makes its namespace due,
// over the conversation's record (internal/evidence). A user's session owes a digest
// once LOOM_SESSION_DIGEST_MIN_TURNS of its turns are not digested, or once it has
// turns not digested and none new for LOOM_SESSION_DIGEST_IDLE_SECONDS; only sessions
// with a turn kept in the last LOOM_SESSION_DIGEST_MAX_AGE_DAYS are looked at. A due
// namespace's owed sessions are digested; while one of its sessions has turns not
// digested (not yet quiet, or its call failed) the namespace's records are given back
// due again after LOOM_SESSION_DIGEST_INTERVAL_MS (a minute at most), and once none has,
// they are stamped done. Each owed session costs one model call per window: the
// session's digest so far and up to LOOM_SESSION_DIGEST_MAX_TURNS turns after it,
// answered as a digest of the whole session, which the write side keeps sealed
// (command.KeepSessionDigest) in place of the one before. The digest's window end is
// the session's stamp: a pass that dies, a provider outage, a spent cap or a malformed
// answer leaves the session owed, and the next pass asks again. Without a provider the
// pass does not run and no session is digested. Two processes' passes take a session
// under a Postgres advisory lock each and, under it, read the session's digest again,
// so a window is asked once.

const workerSessionDigest = "session_digest"

// digestTurnChars is how much of one turn the prompt shows.
const digestTurnChars = 2000

// digestRetry is how long a session whose call failed (an outage the provider's own
// retries did not outlast, a refusal, an unusable answer) waits in this process: ten
// passes, ten minutes at most.
func (s *Service) digestRetry() time.Duration {
	return min(10*s.cfg.SessionDigest.Interval, 10*time.Minute)
}

var digestSchema = llm.MustSchema("session_digest", "A digest of a conversation session", map[string]any{
	"type": "object",
	"properties": map[string]any{
		"digest": map[string]any{"type": "string", "description": "the digest of the whole session so far"},
	},
	"required":             []string{"digest"},
	"additionalProperties": false,
})

const digestSystem = `You keep the digest of one conversation session between a user and an agent. ` +
	`Given the digest so far (empty at first) and the turns since, write the digest of the whole session: ` +
	`who took part, what was asked, decided, stated and left open, with names, numbers and dates as said. ` +
	`Plain sentences, at most 200 words, nothing that was not said.`

// RunSessionDigests runs the session_digest pass until ctx ends: woken by its feed, and
// every interval (a minute at most) for the namespaces whose sessions were not yet quiet.
func (s *Service) RunSessionDigests(ctx context.Context) {
	cfg := s.cfg.SessionDigest
	s.runPasses(ctx, workerSessionDigest, s.soon(workerSessionDigest), cfg.MaxAge+24*time.Hour, s.digestPass)
}

// digestOwing is when a session owes a digest now.
func (s *Service) digestOwing() evidence.Owing {
	cfg, now := s.cfg.SessionDigest, s.now()
	return evidence.Owing{Since: now.Add(-cfg.MaxAge), IdleBefore: now.Add(-cfg.Idle), MinTurns: cfg.MinTurns}
}

// digestPass digests the owed sessions of the namespaces of a batch of records.
func (s *Service) digestPass(ctx context.Context) passResult {
	cfg := s.cfg.SessionDigest
	return s.dueNamespacePass(ctx, workerSessionDigest, cfg.Batch, cfg.MaxAge, outcomeDigested, false, s.digestNamespace)
}

// digestNamespace digests up to a batch of a namespace's owed sessions, one model call
// each, and answers errNotYet while a session of it has turns not digested.
func (s *Service) digestNamespace(ctx context.Context, d dueNamespace) error {
	owing := s.digestOwing()
	owing.Org, owing.Namespace = d.org, d.namespace
	owed, err := evidence.OwedSessions(ctx, s.pool, owing, s.cfg.SessionDigest.Batch)
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
			if s.digestWait[sessionKey(o)].After(s.now()) {
				continue
			}
			var later errNotYet
			if err := s.digestLocked(ctx, conn, o); errors.Is(err, errStopped) || errors.As(err, &later) {
				return err
			} else if err != nil {
				failed = err
			}
		}
	}
	if failed != nil {
		return failed
	}
	// Every session with turns not digested, quiet or not: the namespace is due again
	// until none is left.
	owing.IdleBefore, owing.MinTurns = s.now().Add(100*365*24*time.Hour), 1
	pending, err := evidence.CountOwedSessions(ctx, s.pool, owing)
	if err != nil {
		return err
	}
	if pending > 0 {
		return notYet(s.soon(workerSessionDigest))
	}
	return nil
}

// digestLocked digests one owed session under its advisory lock on conn: nil when it
// is digested, or another process holds it or digested it; errStopped when the
// provider stopped the pass, errNotYet when the namespace's cap is spent.
func (s *Service) digestLocked(ctx context.Context, conn *pgxpool.Conn, o evidence.OwedSession) error {
	var locked bool
	lock := "session_digest/" + sessionKey(o)
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, lock).Scan(&locked); err != nil {
		return fmt.Errorf("take a session's lock: %w", err)
	}
	if !locked {
		return nil // another process digests it; the pending count keeps the namespace due
	}
	outcome, err := s.digestSession(ctx, o)
	if _, uerr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, lock); uerr != nil {
		s.log.Warn("session digest: releasing a session's lock failed", "err", uerr)
	}
	if errors.Is(err, errDigestedElsewhere) {
		return nil
	}
	switch outcome.Class {
	case 0:
		if err != nil {
			return fmt.Errorf("digest a session: %w", err)
		}
		return nil
	case llm.ClassStopped:
		return errStopped
	case llm.ClassCapped:
		return notYet(s.soon(workerSessionDigest))
	default:
		// Transient (retried by the provider already), refused or malformed: later.
		s.digestWait[sessionKey(o)] = s.now().Add(s.digestRetry())
		return nil
	}
}

// errDigestedElsewhere: another pass digested the window since this one read the
// session owed.
var errDigestedElsewhere = errors.New("the session's window is digested by another pass")

// sessionKey names a user's session; no name holds a slash (memrow's name rules).
func sessionKey(o evidence.OwedSession) string {
	return o.Org + "/" + o.Namespace + "/" + o.UserID + "/" + o.SessionID
}

// digestSession digests one window of a session: the digest so far, the turns after
// it, one model call, the new digest kept.
func (s *Service) digestSession(ctx context.Context, o evidence.OwedSession) (llm.Outcome, error) {
	scope := evidence.Scope{Org: o.Org, Namespace: o.Namespace, UserID: o.UserID}
	prev, had, err := evidence.NewestDigest(ctx, s.pool, scope, o.SessionID)
	if err != nil {
		return llm.Outcome{}, err
	}
	if had && prev.WindowEnd >= o.From {
		// Read again under the session's lock: another pass digested this window since
		// this one read the session owed (its list is as old as the pass's batch).
		return llm.Outcome{}, errDigestedElsewhere
	}
	turns, err := evidence.Window(ctx, s.pool, scope, o.SessionID, o.From, o.From+s.cfg.SessionDigest.MaxTurns-1)
	if err == nil && len(turns) == 0 {
		// A redaction left a gap wider than a window: read up to the last turn.
		turns, err = evidence.Window(ctx, s.pool, scope, o.SessionID, o.From, o.LastIndex)
	}
	if err != nil || len(turns) == 0 {
		return llm.Outcome{}, err
	}
	if len(turns) > s.cfg.SessionDigest.MaxTurns {
		turns = turns[:s.cfg.SessionDigest.MaxTurns]
	}
	covered := len(turns)
	if had {
		covered += prev.Turns
	}
	bill := llm.Bill{Org: o.Org, Namespace: o.Namespace, Purpose: llm.PurposeSessionDigest}
	var ans llm.Answer
	var out struct {
		Digest string `json:"digest"`
	}
	step := s.models.Step(ctx, bill, s.outage, func(ctx context.Context) error {
		var err error
		ans, err = s.models.CompleteJSON(ctx, llm.Request{Bill: bill, Schema: digestSchema, MaxTokens: 1200,
			Messages: []llm.Message{{Role: llm.RoleSystem, Content: digestSystem}, {Role: llm.RoleUser, Content: digestPrompt(prev.Text, turns)}}}, &out)
		return err
	})
	if !step.Answered() {
		return step, step.Err
	}
	text := strings.TrimSpace(out.Digest)
	if text == "" {
		return llm.Outcome{Class: llm.ClassMalformed}, fmt.Errorf("the model answered an empty digest")
	}
	last := turns[len(turns)-1]
	_, err = s.cmd.KeepSessionDigest(ctx, evidence.Digest{Org: o.Org, Namespace: o.Namespace, UserID: o.UserID, SessionID: o.SessionID,
		WindowEnd: last.MessageIndex, Turns: covered, Model: ans.Model}, text)
	return llm.Outcome{}, err
}

// digestPrompt shows the digest so far and the turns after it, one per line.
func digestPrompt(prev string, turns []evidence.Opened) string {
	var b strings.Builder
	b.WriteString("Digest so far:\n")
	if prev == "" {
		b.WriteString("(none)\n")
	} else {
		b.WriteString(prev + "\n")
	}
	b.WriteString("\nTurns since:\n")
	for _, t := range turns {
		who := t.Role
		if t.Speaker != "" {
			who += " (" + t.Speaker + ")"
		}
		text := t.Text
		if utf8.RuneCountInString(text) > digestTurnChars {
			text = string([]rune(text)[:digestTurnChars]) + "…"
		}
		fmt.Fprintf(&b, "[%d] %s %s: %s\n", t.MessageIndex, t.OccurredAt.UTC().Format(time.RFC3339), who, strings.ReplaceAll(text, "\n", " "))
	}
	return b.String()
}
