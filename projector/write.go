package projector

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/tableset"
	"github.com/loomplane/loom/internal/text"
)

// The column lists are explicit: ClickHouse 18.16 needs them, and they keep an insert
// valid when a later migration adds a column.
const (
	columnsMemory = `org, namespace, agent, user_id, session_id, memory_key, memory_id, version, seq,
		memory_type, status, tombstone, value, content_sha256, tags, entities, confidence, reinforcement_count, actor,
		source_class, embedding_model, embedding_dim, created_at, updated_at, committed_at,
		pinned, locked, sensitivity, valid_at, valid_to, expires_at, on_expire, superseded_by, duplicate_of, conflict_with,
		judgement_owed, recall_count, evidence_count`
	columnsVersions = `org, namespace, agent, user_id, session_id, memory_key, version,
		memory_id, seq, event_type, op, memory_type, status, tombstone, value, content_sha256, tags, entities, confidence,
		reinforcement_count, actor, source_class, created_at, updated_at, committed_at,
		pinned, locked, sensitivity, valid_at, valid_to, expires_at, on_expire, superseded_by, duplicate_of, conflict_with,
		judgement_owed, recall_count, evidence_count`
	columnsEmbeddings = `org, namespace, agent, user_id, session_id, memory_key,
		memory_id, version, seq, memory_type, status, tombstone, content_sha256, tags, source_class, embedding_model,
		embedding_dim, embedding, updated_at, pinned, sensitivity, valid_to, expires_at, key_embedding`
	columnsAudit = `org, namespace, seq, op, event_type, occurred_at, actor, agent, user_id,
		session_id, memory_key, memory_id, version, content_sha256, source_class, status, request_id,
		prev_hash, row_hash, subject_commitment, subject_salt, detail, chain_format`
)

// insertInto is the insert statement of table in set with its column list.
func insertInto(set tableset.Set, table, columns string) string {
	return "INSERT INTO " + set.Qualified(table) + " (" + columns + ")"
}

// writeRows sends one insert per table, all at once: the tables are independent
// and each collapses a row it sees twice, so a batch that fails part-way is simply
// written again. audits are the rows' audit rows and those of records that project
// nothing else (a redaction); graphRows the batch's folded graph rows. Every insert
// goes to the tables of set; the lexical rows' terms are stemmed through stems.
func writeRows(ctx context.Context, conn *ch.Conn, set tableset.Set, rows []opened, audits []*auditRow, graphRows []nsGraph, stems *text.Stems) error {
	var inserts []func() error
	insert := func(table, columns string, fill func(driver.Batch) error) {
		inserts = append(inserts, func() error { return send(ctx, conn, set.Qualified(table), insertInto(set, table, columns), fill) })
	}
	if len(rows) > 0 {
		insert("memory", columnsMemory, memoryFill(rows))
		insert("memory_versions", columnsVersions, versionsFill(rows))
		insert("memory_embeddings", columnsEmbeddings, embeddingsFill(rows))
		insert("memory_lexical", columnsLexical, lexicalFill(rows, stems))
	}
	if len(audits) > 0 {
		insert("audit_log", columnsAudit, auditFill(audits))
	}
	if fill, any := chunksFill(rows); any {
		insert("memory_chunks", columnsChunks, fill)
	}
	for _, g := range graphInserts(graphRows) {
		insert(g.table, g.columns, g.fill)
	}
	errs := make([]error, len(inserts))
	var wg sync.WaitGroup
	for i, insert := range inserts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = insert()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func memoryFill(rows []opened) func(driver.Batch) error {
	return func(b driver.Batch) error {
		var tags, entities, conflicts stringCells
		for _, r := range rows {
			v, c := r.env.Revision, r.content
			if err := b.Append(r.env.Org, r.env.Namespace, v.Agent, v.UserID, v.SessionID, c.MemoryKey, mustUUID(v.MemoryID),
				uint64(v.Version), uint64(r.env.Seq), v.MemoryType, v.Status, b2u(v.Tombstone), string(c.Value), v.ContentSHA256,
				tags.of(c.Tags), entities.of(c.Entities), float32(v.Confidence), uint32(v.ReinforcementCount), v.Actor, v.SourceClass,
				v.EmbeddingModel, uint16(v.EmbeddingDim), seconds(v.CreatedAt), seconds(v.UpdatedAt), seconds(r.env.CommittedAt),
				b2u(v.Pinned), b2u(v.Locked), sensitivity(v), secondsPtr(v.ValidAt), secondsPtr(v.ValidTo), secondsPtr(v.ExpiresAt),
				v.OnExpire, v.SupersededBy, v.DuplicateOf, conflicts.of(v.ConflictWith), b2u(v.JudgementOwed), uint32(v.RecallCount),
				uint32(v.EvidenceCount)); err != nil {
				return err
			}
		}
		return nil
	}
}

func versionsFill(rows []opened) func(driver.Batch) error {
	return func(b driver.Batch) error {
		var tags, entities, conflicts stringCells
		for _, r := range rows {
			v, c := r.env.Revision, r.content
			if err := b.Append(r.env.Org, r.env.Namespace, v.Agent, v.UserID, v.SessionID, c.MemoryKey, uint64(v.Version),
				mustUUID(v.MemoryID), uint64(r.env.Seq), string(r.env.Type), v.Op, v.MemoryType, v.Status, b2u(v.Tombstone),
				string(c.Value), v.ContentSHA256, tags.of(c.Tags), entities.of(c.Entities), float32(v.Confidence),
				uint32(v.ReinforcementCount), v.Actor, v.SourceClass, seconds(v.CreatedAt), seconds(v.UpdatedAt),
				seconds(r.env.CommittedAt), b2u(v.Pinned), b2u(v.Locked), sensitivity(v), secondsPtr(v.ValidAt),
				secondsPtr(v.ValidTo), secondsPtr(v.ExpiresAt), v.OnExpire, v.SupersededBy, v.DuplicateOf,
				conflicts.of(v.ConflictWith), b2u(v.JudgementOwed), uint32(v.RecallCount),
				uint32(v.EvidenceCount)); err != nil {
				return err
			}
		}
		return nil
	}
}

func embeddingsFill(rows []opened) func(driver.Batch) error {
	return func(b driver.Batch) error {
		// Every revision replaces the key's search document: one without a vector (a
		// tombstone, a row that is not embedded) retires the older vector.
		var tags stringCells
		var vec, keyVec floatCells
		for _, r := range rows {
			v, c := r.env.Revision, r.content
			if err := b.Append(r.env.Org, r.env.Namespace, v.Agent, v.UserID, v.SessionID, c.MemoryKey,
				mustUUID(v.MemoryID), uint64(v.Version), uint64(r.env.Seq), v.MemoryType, v.Status, b2u(v.Tombstone),
				v.ContentSHA256, tags.of(c.Tags), v.SourceClass, v.EmbeddingModel, uint16(len(c.Embedding)), vec.of(c.Embedding),
				seconds(v.UpdatedAt), b2u(v.Pinned), sensitivity(v), secondsPtr(v.ValidTo), secondsPtr(v.ExpiresAt),
				keyVec.of(c.KeyEmbedding)); err != nil {
				return err
			}
		}
		return nil
	}
}

func auditFill(rows []*auditRow) func(driver.Batch) error {
	return func(b driver.Batch) error {
		for _, r := range rows {
			c := r.Row
			if err := b.Append(c.Org, c.Namespace, c.Seq, c.Op, c.EventType, c.OccurredAt, c.Actor, c.Agent, r.userID,
				c.SessionID, r.memoryKey, mustUUID(c.MemoryID), c.Version, r.contentSHA256, c.SourceClass, c.Status, c.RequestID,
				c.PrevHash, c.RowHash, c.SubjectCommitment, r.subjectSalt, c.Detail, chainFormat(c)); err != nil {
				return err
			}
		}
		return nil
	}
}

// flushRows is how many rows an insert's block takes before it is sent on, within the
// same INSERT. The driver grows each column one value at a time (a 5,000-row replay
// batch's two vector columns are 3.8 M floats, regrown about 40 times, each growth a
// copy and a clear: a third of the projector's CPU in a replay), and a block sent
// keeps its columns' capacity when it is reset, so the rows past the first flushRows
// fill it without growing it again. The server squashes an INSERT's blocks into one
// part (min_insert_block_size_rows), so the parts budget is unchanged.
const flushRows = 500

// flushing is an insert's batch that sends its block every flushRows rows.
type flushing struct {
	driver.Batch
	rows int
}

func (f *flushing) Append(v ...any) error {
	if err := f.Batch.Append(v...); err != nil {
		return err
	}
	if f.rows++; f.rows%flushRows == 0 {
		return f.Flush()
	}
	return nil
}

func send(ctx context.Context, conn *ch.Conn, table, query string, fill func(driver.Batch) error) error {
	prepared, err := conn.PrepareBatch(ctx, query)
	if err != nil {
		return fmt.Errorf("prepare insert into %s: %w", table, err)
	}
	b := &flushing{Batch: prepared}
	if err := fill(b); err != nil {
		b.Abort()
		return fmt.Errorf("build insert into %s: %w", table, err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert into %s: %w", table, err)
	}
	return nil
}

func sensitivity(v *events.Revision) string {
	if v.Sensitivity == "" {
		return "normal"
	}
	return v.Sensitivity
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func mustUUID(s string) uuid.UUID {
	u, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil
	}
	return u
}
