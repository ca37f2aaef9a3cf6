package command

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/route"
)

// memory.observe (POST /v1/namespaces/{ns}/turns) appends turns of a conversation to
// its record without extracting anything: an agent that writes its facts itself logs
// the conversation as it happens, and memory.recall finds the turns. The turns are
// kept as memory.set_from_messages keeps its inputs (keepTurns): evidence rows sealed
// under one data key, and one memory.turns_observed record on the change topic, in one
// transaction that takes the namespace's next seq.

// Limits of one call.
const (
	maxObservedTurns = 1000
	maxTurnChars     = 32000
	maxSpeakerChars  = 200
)

// Turn roles, as memory.set_from_messages' transcript has them.
var turnRoles = map[string]bool{"user": true, "assistant": true, "system": true, "tool": true}

// observedTurn is one turn of memory.observe's body.
type observedTurn struct {
	Role    string     `json:"role"`
	Content string     `json:"content"`
	Speaker string     `json:"speaker,omitempty"`
	At      *time.Time `json:"at,omitempty"` // when it was said; default: now
	// keepID is the turn id a restore keeps (restore_turns.go); a call's turns get
	// fresh ones.
	keepID string
}

// observeRequest is memory.observe's body.
type observeRequest struct {
	Turns     []observedTurn `json:"turns"`
	Agent     string         `json:"agent,omitempty"`
	UserID    string         `json:"user_id,omitempty"`
	SessionID string         `json:"session_id,omitempty"`
}

// keptTurn is a turn as it was kept.
type keptTurn struct {
	TurnID       string    `json:"turn_id"`
	Role         string    `json:"role"`
	MessageIndex int       `json:"message_index"`
	OccurredAt   time.Time `json:"occurred_at"`
}

// observeAnswer is memory.observe's answer.
type observeAnswer struct {
	Namespace string     `json:"namespace"`
	Agent     string     `json:"agent"`
	UserID    string     `json:"user_id"`
	SessionID string     `json:"session_id"`
	Seq       int64      `json:"seq"`
	Turns     []keptTurn `json:"turns"`
}

func (a *observeAnswer) committed() bool { return true }
func (a *observeAnswer) outcome() string { return "ok" }

// observe is memory.observe.
func (s *Service) observe(ctx context.Context, p auth.Principal, ns string, req observeRequest) (*observeAnswer, error) {
	id, other, err := route.WriteIdentity(p, ns, "", route.Names{Agent: req.Agent, UserID: req.UserID, SessionID: req.SessionID})
	if err != nil {
		return nil, err
	}
	if other {
		return nil, otherUser()
	}
	if err := validIdentity(id); err != nil {
		return nil, err
	}
	if err := checkTurns(req.Turns); err != nil {
		return nil, err
	}
	kept, seq, err := s.keepTurns(ctx, id, req.Turns, evidence.SourceObserve, nil)
	if err != nil {
		return nil, err
	}
	return &observeAnswer{Namespace: ns, Agent: id.Agent, UserID: id.UserID, SessionID: id.SessionID, Seq: seq, Turns: kept}, nil
}

// checkTurns validates the turns of a call, naming the field of the first bad one.
func checkTurns(turns []observedTurn) error {
	if len(turns) == 0 || len(turns) > maxObservedTurns {
		return httperr.Validation("turns", fmt.Sprintf("turns must hold 1 to %d turns", maxObservedTurns))
	}
	for i, t := range turns {
		if !turnRoles[t.Role] {
			return httperr.Validation(fmt.Sprintf("turns[%d].role", i), "role must be user, assistant, system or tool")
		}
		field := fmt.Sprintf("turns[%d].content", i)
		if strings.TrimSpace(t.Content) == "" {
			return httperr.Validation(field, "content must be non-empty text")
		}
		if n := utf8.RuneCountInString(t.Content); n > maxTurnChars {
			return httperr.Validation(field, fmt.Sprintf("a turn holds at most %d characters, not %d", maxTurnChars, n))
		}
		if err := memrow.CheckText(field, t.Content); err != nil {
			return err
		}
		if utf8.RuneCountInString(t.Speaker) > maxSpeakerChars {
			return httperr.Validation(fmt.Sprintf("turns[%d].speaker", i), fmt.Sprintf("a speaker holds at most %d characters", maxSpeakerChars))
		}
		if err := memrow.CheckText(fmt.Sprintf("turns[%d].speaker", i), t.Speaker); err != nil {
			return err
		}
	}
	return nil
}

// turnBatch is turns of one conversation sealed for keeping, each under a fresh data
// key of its own (stored wrapped on its row alone), ready to be written in a
// transaction (writeTurns): by itself (keepTurns), or in the commit of the facts drawn
// from them (factWriter), so no fact is ever committed without its evidence.
type turnBatch struct {
	id     memrow.Identity
	source string
	turns  []observedTurn
	rows   []evidence.Turn
	keys   [][]byte
	// chunks are the verbatim chunks cut from the turns (cutChunks), their message
	// indexes the call's own: writeTurns numbers a copy after the session's last.
	chunks []evidence.Chunk
	refs   writerRefs // the user, agent and session by reference, as the record names them
	refGen int        // the generation of the key that named them (the record's ce_loomrefgen)
	now    time.Time
	// fence, when set, runs in writeTurns' transaction once the namespace's generation
	// lock is held (an erasure holds it while it removes rows): a restore refuses turns
	// of a user an erasure removed meanwhile (restore_turns.go).
	fence func(context.Context, pgx.Tx) error
}

// sealTurns seals turns for keeping and checks that their record fits the broker
// before anything is written or any model is asked.
func (s *Service) sealTurns(ctx context.Context, id memrow.Identity, turns []observedTurn, source string) (*turnBatch, error) {
	refKey, err := s.userRefs.Current(ctx, id.Org)
	if err != nil {
		return nil, httperr.Store("reading the org's user reference key", err)
	}
	orgKey := refKey.Key
	refs, err := writerRefsOf(orgKey, id.UserID, id.Agent, id.SessionID)
	if err != nil {
		return nil, fmt.Errorf("name the turns' writer: %w", err)
	}
	termKey := evidence.TermKey(orgKey)
	// Each turn has a data key of its own, so one turn can be shredded (a redaction of a
	// memory drawn from it) without its neighbours.
	tb := &turnBatch{id: id, source: source, turns: turns, refs: refs, refGen: refKey.Gen, now: s.now().UTC(),
		rows: make([]evidence.Turn, len(turns)), keys: make([][]byte, len(turns))}
	for i, t := range turns {
		at := tb.now
		if t.At != nil {
			at = t.At.UTC()
		}
		if tb.keys[i], err = events.NewDataKey(); err != nil {
			return nil, err
		}
		storedKey, err := s.storedKey(tb.keys[i])
		if err != nil {
			return nil, err
		}
		sealed, err := evidence.Seal(tb.keys[i], id.Agent, id.SessionID, t.Content, t.Speaker)
		if err != nil {
			return nil, err
		}
		turnID := t.keepID
		if turnID == "" {
			turnID = uuid.NewString()
		}
		tb.rows[i] = evidence.Turn{Org: id.Org, Namespace: id.Namespace, TurnID: turnID, Agent: id.Agent, UserID: id.UserID,
			SessionID: id.SessionID, Role: t.Role, OccurredAt: at, Source: source, DataKey: storedKey, Sealed: sealed,
			Terms: evidence.TermHashes(termKey, t.Content)}
	}
	if tb.chunks, err = s.cutChunks(id, tb.rows, turns, source); err != nil {
		return nil, err
	}
	// The record's size hardly depends on its seq and indexes: measured now, a record too
	// large is refused before the facts' model calls are spent.
	env, err := tb.record(1, 0)
	if err != nil {
		return nil, err
	}
	if _, err := turnsRecordValue(env); err != nil {
		return nil, err
	}
	return tb, nil
}

// record numbers the batch's rows (seq, and message indexes from next) and makes
// their memory.turns_observed record, each turn sealed under its row's key.
func (tb *turnBatch) record(seq int64, next int) (*events.Envelope, error) {
	id := tb.id
	recordID := events.RecordID(id.Org, id.Namespace, seq)
	items := make([]events.TurnMeta, len(tb.rows))
	for i := range tb.rows {
		tb.rows[i].Seq, tb.rows[i].MessageIndex = seq, next+i
		sealed, err := events.SealTurn(tb.keys[i], recordID, tb.rows[i].TurnID, events.TurnText{Text: tb.turns[i].Content, Speaker: tb.turns[i].Speaker,
			Agent: id.Agent, SessionID: id.SessionID})
		if err != nil {
			return nil, err
		}
		items[i] = events.TurnMeta{TurnID: tb.rows[i].TurnID, Role: tb.rows[i].Role, MessageIndex: tb.rows[i].MessageIndex,
			OccurredAt: tb.rows[i].OccurredAt, Sealed: sealed}
	}
	return &events.Envelope{Version: events.EnvelopeVersion, ID: recordID, Type: events.TypeTurnsObserved,
		Org: id.Org, Namespace: id.Namespace, Seq: seq, CommittedAt: tb.now,
		Turns: &events.Turns{AgentRef: tb.refs.agent, UserRef: tb.refs.user, SessionRef: tb.refs.session, Source: tb.source, Items: items}}, nil
}

// writeTurns writes a batch in tx: it advances the namespace's generation by one (the
// record's seq), numbers the turns after the session's last, writes their rows and chunks and
// queues their record for the relay (kept for a republish too). links, when set,
// names the belief sources written with them. Two round trips (three with a fence):
// the advance with the session's next index, then the writes. Run again in a new
// transaction (a commit's retry), it numbers the turns afresh. The caller wakes the
// relay after the commit.
func (s *Service) writeTurns(ctx context.Context, tx pgx.Tx, tb *turnBatch, links func([]evidence.Turn) []evidence.Link) error {
	id := tb.id
	var seq int64
	var next int
	b := &pgx.Batch{}
	generations.QueueAdvance(b, id.Org, id.Namespace, 1, &seq)
	if tb.fence == nil {
		// Read in the advance's round trip, under the lock it takes.
		tb.queueNextIndex(b, &next)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("advance the generation: %w", err)
	}
	if tb.fence != nil {
		if err := tb.fence(ctx, tx); err != nil {
			return err
		}
		var err error
		if next, err = evidence.NextIndex(ctx, tx, id.Org, id.Namespace, id.UserID, id.SessionID); err != nil {
			return err
		}
	}
	b = &pgx.Batch{}
	if err := s.queueTurns(b, tb, seq, next, links); err != nil {
		return err
	}
	if s.relayWake == nil {
		outbox.QueueNotify(b)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write the turns and their record: %w", err)
	}
	return nil
}

// queueNextIndex queues the read of the index the batch's first turn takes in its
// session, for a batch that holds the namespace's generation lock when it runs.
func (tb *turnBatch) queueNextIndex(b *pgx.Batch, next *int) {
	evidence.QueueNextIndex(b, tb.id.Org, tb.id.Namespace, tb.id.UserID, tb.id.SessionID, next)
}

// queueTurns queues the batch's rows, chunks and record, numbered under seq with
// message indexes from next, and the belief sources links names: a statement each,
// whatever the number of turns.
func (s *Service) queueTurns(b *pgx.Batch, tb *turnBatch, seq int64, next int, links func([]evidence.Turn) []evidence.Link) error {
	env, err := tb.record(seq, next)
	if err != nil {
		return err
	}
	chunks := slices.Clone(tb.chunks)
	for i := range chunks {
		chunks[i].Seq, chunks[i].FirstIndex, chunks[i].LastIndex = seq, next+chunks[i].FirstIndex, next+chunks[i].LastIndex
	}
	evidence.QueueInsert(b, tb.rows)
	evidence.QueueInsertChunks(b, chunks)
	if err := s.queueTurnsRecord(b, env, tb.refGen); err != nil {
		return err
	}
	if links != nil {
		evidence.QueueInsertLinks(b, links(tb.rows))
	}
	return nil
}

// pickTurns is a sealed batch of the turns at picks (in order) alone, their chunks cut
// again.
func (s *Service) pickTurns(tb *turnBatch, picks []int) (*turnBatch, error) {
	out := *tb
	out.turns, out.rows, out.keys = make([]observedTurn, len(picks)), make([]evidence.Turn, len(picks)), make([][]byte, len(picks))
	for i, k := range picks {
		out.turns[i], out.rows[i], out.keys[i] = tb.turns[k], tb.rows[k], tb.keys[k]
	}
	var err error
	out.chunks, err = s.cutChunks(tb.id, out.rows, out.turns, tb.source)
	return &out, err
}

// kept is the batch's turns as they were kept.
func (tb *turnBatch) kept() []keptTurn {
	out := make([]keptTurn, len(tb.rows))
	for i, r := range tb.rows {
		out[i] = keptTurn{TurnID: r.TurnID, Role: r.Role, MessageIndex: r.MessageIndex, OccurredAt: r.OccurredAt}
	}
	return out
}

// keepTurns commits turns of one conversation as evidence in a transaction of their
// own (writeTurns). Deleting a row (an erasure, a redaction of a memory drawn from it)
// destroys the only copy of its key. links, when set, names the belief sources that
// commit with the turns.
func (s *Service) keepTurns(ctx context.Context, id memrow.Identity, turns []observedTurn, source string,
	links func([]evidence.Turn) []evidence.Link) ([]keptTurn, int64, error) {
	tb, err := s.sealTurns(ctx, id, turns, source)
	if err != nil {
		return nil, 0, err
	}
	if err := s.commitTurns(ctx, tb, links); err != nil {
		return nil, 0, err
	}
	return tb.kept(), tb.rows[0].Seq, nil
}

// commitTurns writes a sealed batch in a transaction of its own.
func (s *Service) commitTurns(ctx context.Context, tb *turnBatch, links func([]evidence.Turn) []evidence.Link) error {
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error { return s.writeTurns(ctx, tx, tb, links) })
	if err != nil {
		var he *httperr.Error
		if errors.As(err, &he) {
			return he
		}
		return httperr.Store("keeping the turns", err)
	}
	s.relayWake.Queued()
	return nil
}

// queueTurnsRecord queues a memory.turns_observed record for the relay and keeps it
// for a republish, as an erasure's record is (queueGenerationRecord).
func (s *Service) queueTurnsRecord(b *pgx.Batch, env *events.Envelope, refGen int) error {
	value, err := turnsRecordValue(env)
	if err != nil {
		return err
	}
	return s.queueEncodedRecord(b, env, value, refGen)
}

// turnsRecordValue encodes a memory.turns_observed record, refusing one too large for
// the broker.
func turnsRecordValue(env *events.Envelope) ([]byte, error) {
	value, err := events.Encode(env)
	if err != nil {
		return nil, fmt.Errorf("encode the %s record: %w", env.Type, err)
	}
	if len(value) > maxRequestRecordBytes {
		return nil, httperr.New(http.StatusRequestEntityTooLarge, httperr.CodePayloadTooLarge,
			fmt.Sprintf("the turns' record is %d bytes; one call keeps at most %d: send fewer turns at a time", len(value), maxRequestRecordBytes))
	}
	return value, nil
}

// cutChunks cuts a call's turns into verbatim chunks (internal/evidence's chunker), each
// sealed under a fresh data key of its own stored wrapped on its row alone, with the
// turns it was cut from. Message indexes are the call's own (0 for its first turn):
// writeTurns adds the session's next index, read under the generation lock.
func (s *Service) cutChunks(id memrow.Identity, rows []evidence.Turn, turns []observedTurn, source string) ([]evidence.Chunk, error) {
	in := make([]evidence.ChunkTurn, len(rows))
	for i, r := range rows {
		in[i] = evidence.ChunkTurn{TurnID: r.TurnID, Role: r.Role, Speaker: turns[i].Speaker, Text: turns[i].Content,
			MessageIndex: i, OccurredAt: r.OccurredAt}
	}
	cuts := evidence.CutChunks(in, evidence.ChunkMaxWords)
	out := make([]evidence.Chunk, len(cuts))
	for i, c := range cuts {
		key, err := events.NewDataKey()
		if err != nil {
			return nil, err
		}
		storedKey, err := s.storedKey(key)
		if err != nil {
			return nil, err
		}
		sealed, err := evidence.SealChunk(key, id.Agent, id.SessionID, c.Text)
		if err != nil {
			return nil, err
		}
		out[i] = evidence.Chunk{Org: id.Org, Namespace: id.Namespace, ChunkID: uuid.NewString(), Agent: id.Agent, UserID: id.UserID,
			SessionID: id.SessionID, FirstIndex: c.FirstIndex, LastIndex: c.LastIndex, Part: c.Part, OccurredAt: c.OccurredAt,
			Source: source, DataKey: storedKey, Sealed: sealed, TurnIDs: c.TurnIDs}
	}
	return out, nil
}
