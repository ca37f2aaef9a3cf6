package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
)

// revision is one write on its way to the commit: what the request fixed before any
// head was read.
type revision struct {
	op     string
	id     memrow.Identity
	actor  string
	value  []byte
	sha    string
	vector []float32
}

// errHeadMoved sends a write back to read the head again: another commit changed the
// key between this round's read and its commit.
var errHeadMoved = errors.New("head moved since it was read")

// admit runs rounds of read head → build row → commit until one commits over the head
// it read, or the rounds run out (503 ADMISSION_CONTENDED, retryable, nothing written).
// All of it runs within the write deadline: past it the write answers 503
// POSTGRES_UNAVAILABLE, with outcome_unknown when its COMMIT had been sent (a commit
// waiting for a synchronous standby that does not answer ends that way, and it is never
// answered 200).
func (s *Service) admit(c *fiber.Ctx, rev *revision, build func(head *memrow.Row) *memrow.Row) (*setAnswer, error) {
	ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.WriteDeadline)
	defer cancel()
	for round := 0; round < s.cfg.AdmissionRounds; round++ {
		head, err := heads.Read(ctx, s.pool, rev.id)
		if err != nil {
			return nil, httperr.Store("reading the head", err)
		}
		row := build(head)
		event, err := s.commit(ctx, rev, head, row, c.Get("X-Request-Id"))
		if errors.Is(err, errHeadMoved) {
			continue
		}
		if err != nil {
			if pg.Conflict(err) {
				return nil, contended(err)
			}
			return nil, httperr.Store("committing the revision", err)
		}
		return answer(row, event), nil
	}
	return nil, contended(errHeadMoved)
}

func contended(cause error) *httperr.Error {
	return httperr.Unavailable(httperr.CodeAdmissionContended, "the key kept changing while this write was admitted; retry", cause)
}

// commit is the one transaction every revision commits through. In order: advance the
// namespace generation (which locks it and draws the revision's seq, so a namespace's
// outbox rows are in seq order), lock the head and check it is the one this round
// read, then upsert the head and insert the revision, its data key and its outbox
// record. Either all of it commits or none.
func (s *Service) commit(ctx context.Context, rev *revision, head, row *memrow.Row, requestID string) (events.Type, error) {
	now := s.now().UTC()
	event := events.TypeWritten
	var readVersion int64
	if head != nil {
		readVersion = head.Version
		if head.Live() {
			event = events.TypeRevised
		}
	}
	if row.MemoryID == "" {
		row.MemoryID = uuid.NewString()
	}
	if row.CreatedAt.IsZero() {
		row.CreatedAt = now
	}
	row.UpdatedAt = now
	row.Version = memrow.NextVersion(now, readVersion)

	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var seq, locked int64
		b := &pgx.Batch{}
		b.Queue(fmt.Sprintf("SET LOCAL lock_timeout = %d", s.cfg.CommitLockTimeout.Milliseconds()))
		b.Queue(`INSERT INTO loom.scope_generations (org, scope, generation) VALUES ($1, $2, 1)
			ON CONFLICT (org, scope) DO UPDATE SET generation = loom.scope_generations.generation + 1, updated_at = now()
			RETURNING generation`, rev.id.Org, rev.id.Namespace).QueryRow(func(r pgx.Row) error { return r.Scan(&seq) })
		b.Queue(`SELECT coalesce(max(version), 0) FROM (SELECT version FROM loom.memory_current
			WHERE org = $1 AND namespace = $2 AND agent = $3 AND user_id = $4 AND session_id = $5 AND memory_key = $6
			FOR UPDATE) h`, rev.id.Org, rev.id.Namespace, rev.id.Agent, rev.id.UserID, rev.id.SessionID, rev.id.MemoryKey).
			QueryRow(func(r pgx.Row) error { return r.Scan(&locked) })
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("advance generation and lock head: %w", err)
		}
		if locked != readVersion {
			return errHeadMoved
		}
		row.Seq = seq
		rec, err := s.encode(rev, row, event, readVersion, requestID)
		if err != nil {
			return err
		}
		return s.insert(ctx, tx, rev, row, rec)
	})
	return event, err
}

// record is a revision encoded for the topic and the journal.
type record struct {
	event   events.Type
	key     []byte
	dataKey []byte
	value   []byte
	headers []byte
	payload []byte // the head row as JSON
	audit   []byte
}

// encode seals the revision's content under a fresh data key and builds its envelope,
// CloudEvents headers and hash-only audit row.
func (s *Service) encode(rev *revision, row *memrow.Row, event events.Type, prevVersion int64, requestID string) (*record, error) {
	dataKey, err := events.NewDataKey()
	if err != nil {
		return nil, err
	}
	recordID := events.RecordID(row.Org, row.Namespace, row.Seq)
	sealed, err := events.Seal(dataKey, recordID, &events.Content{
		MemoryKey: row.MemoryKey, Value: row.Value, Tags: row.Tags, Entities: row.Entities, Embedding: rev.vector,
	})
	if err != nil {
		return nil, fmt.Errorf("seal revision content: %w", err)
	}
	env := &events.Envelope{
		Version: events.EnvelopeVersion, ID: recordID, Type: event,
		Org: row.Org, Namespace: row.Namespace, Seq: row.Seq, CommittedAt: row.UpdatedAt,
		Revision: &events.Revision{
			Op: rev.op, MemoryID: row.MemoryID, Version: row.Version, PrevVersion: prevVersion,
			Agent: row.Agent, UserID: row.UserID, SessionID: row.SessionID,
			MemoryType: row.MemoryType, Status: row.Status, Tombstone: row.Tombstone,
			ContentSHA256: row.ContentSHA256, Confidence: row.Confidence, ReinforcementCount: row.ReinforcementCount,
			Actor: row.Actor, SourceClass: row.SourceClass, EmbeddingModel: row.EmbeddingModel, EmbeddingDim: row.EmbeddingDim,
			CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, RequestID: requestID,
		},
		Sealed: sealed,
	}
	value, err := events.Encode(env)
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	headers, err := json.Marshal(headerPairs(events.CloudEventHeaders(env, s.cfg.EventSource)))
	if err != nil {
		return nil, err
	}
	payload, err := json.Marshal(row)
	if err != nil {
		return nil, err
	}
	audit, err := json.Marshal(map[string]any{
		"op": rev.op, "event_type": event, "actor": row.Actor, "memory_id": row.MemoryID, "memory_key": row.MemoryKey,
		"agent": row.Agent, "user_id": row.UserID, "session_id": row.SessionID, "version": row.Version,
		"content_sha256": row.ContentSHA256, "source_class": row.SourceClass, "status": row.Status, "request_id": requestID,
	})
	if err != nil {
		return nil, err
	}
	return &record{event: event, key: events.RecordKey(row.Org, row.Namespace), dataKey: dataKey, value: value,
		headers: headers, payload: payload, audit: audit}, nil
}

// headerPairs is how the outbox stores headers: an ordered list of [key, value].
func headerPairs(hs []events.Header) [][2]string {
	out := make([][2]string, len(hs))
	for i, h := range hs {
		out[i] = [2]string{h.Key, string(h.Value)}
	}
	return out
}

func (s *Service) insert(ctx context.Context, tx pgx.Tx, rev *revision, row *memrow.Row, rec *record) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO loom.memory_current (org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq, content_sha256, row)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (org, namespace, agent, user_id, session_id, memory_key) DO UPDATE SET
			memory_id = EXCLUDED.memory_id, version = EXCLUDED.version, seq = EXCLUDED.seq,
			content_sha256 = EXCLUDED.content_sha256, row = EXCLUDED.row, updated_at = now()`,
		row.Org, row.Namespace, row.Agent, row.UserID, row.SessionID, row.MemoryKey, row.MemoryID, row.Version, row.Seq, row.ContentSHA256, rec.payload)
	b.Queue(`INSERT INTO loom.memory_revisions (org, namespace, seq, event_type, op, agent, user_id, session_id, memory_key,
			memory_id, version, content_sha256, status, row, audit)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
		row.Org, row.Namespace, row.Seq, string(rec.event), rev.op, row.Agent, row.UserID, row.SessionID, row.MemoryKey,
		row.MemoryID, row.Version, row.ContentSHA256, row.Status, rec.payload, rec.audit)
	b.Queue(`INSERT INTO loom.revision_keys (org, namespace, seq, data_key) VALUES ($1, $2, $3, $4)`,
		row.Org, row.Namespace, row.Seq, rec.dataKey)
	b.Queue(`INSERT INTO loom.outbox (org, namespace, seq, topic, record_key, headers, value) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		row.Org, row.Namespace, row.Seq, s.cfg.Topic, rec.key, rec.headers, rec.value)
	b.Queue(`SELECT pg_notify('loom_outbox', '')`)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write head, revision, key and outbox record: %w", err)
	}
	return nil
}
