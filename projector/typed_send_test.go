package projector

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/text"
)

// sentBatch is a blockBatch that keeps the rows of every block it sends: what reached
// the server, share by share.
type sentBatch struct {
	blockBatch
	sent *[][]any
}

func (b sentBatch) Flush() error {
	*b.sent = append(*b.sent, blockRows(b.block.Columns, b.block.Rows())...)
	return b.blockBatch.Flush()
}

// blockRows reads a block's rows back, each as its columns' values.
func blockRows[C interface{ Row(int, bool) any }](cols []C, n int) [][]any {
	out := make([][]any, n)
	for r := range out {
		for _, c := range cols {
			out[r] = append(out[r], c.Row(r, false))
		}
	}
	return out
}

// typedSent is every row fillTyped sends of rows through cols, into a block of schema.
func typedSent[R any](t *testing.T, schema []string, cols []typedColumn[R], rows []R) [][]any {
	var sent [][]any
	b := sentBatch{blockBatch: newBlockBatch(t, schema...), sent: &sent}
	if err := fillTyped(b, cols, rows); err != nil {
		t.Fatal(err)
	}
	return append(sent, blockRows(b.block.Columns, b.block.Rows())...)
}

// plainSent is the rows of a block appended one row of plain values at a time, as the
// driver takes them: what the projector sent before its columns were built typed.
func plainSent(t *testing.T, schema []string, rows [][]any) [][]any {
	b := newBlockBatch(t, schema...)
	for _, r := range rows {
		if err := b.Append(r...); err != nil {
			t.Fatal(err)
		}
	}
	return blockRows(b.block.Columns, b.block.Rows())
}

// variedRows are replay rows past a share's end (flushRows), with what a row may lack
// or carry: no vectors or tags (a tombstone), every nullable time set, entities,
// conflicts, a high-sensitivity row (no lexical terms).
func variedRows() []opened {
	rows := replayRows(flushRows + 3)
	for i, r := range rows {
		v := r.env.Revision
		v.Agent, v.UserID, v.SessionID, v.Actor = fmt.Sprint("agent-", i), fmt.Sprint("user-", i), fmt.Sprint("session-", i), "ops"
		v.ContentSHA256, v.Op, v.EmbeddingDim = fmt.Sprint("sha-", i), "memory.set", 384
	}
	rows[1].content.Embedding, rows[1].content.KeyEmbedding, rows[1].content.Tags = nil, nil, nil
	rows[1].env.Revision.Tombstone = true
	at := time.Date(2026, 12, 7, 13, 5, 9, 700, time.UTC)
	v := rows[2].env.Revision
	v.ValidAt, v.ValidTo, v.ExpiresAt, v.ConflictWith = &at, &at, &at, []string{"m-1", "m-2"}
	v.Pinned, v.Confidence, v.ReinforcementCount, v.Sensitivity = true, 0.75, 3, "high"
	rows[2].content.Entities = []string{"aisle", "flights"}
	rows[flushRows].env.Revision.Op, rows[flushRows].env.Type = "memory.set", "memory.revised"
	return rows
}

// Every table's rows built as typed columns reach the server as the rows appended one
// plain value at a time: column by column, row by row, across the shares sent on
// within the INSERT, empty arrays and NULLs included.
func TestTypedColumnsSendThePlainValues(t *testing.T) {
	rows := variedRows()
	stems := text.NewStems(stemMemo)
	audits := make([]*auditRow, len(rows))
	for i, o := range rows {
		audits[i] = revisionAudit(o.env, o.content)
		audits[i].PrevHash, audits[i].RowHash, audits[i].Detail = "p", "h", `{"n":1}`
	}
	lexical := lexicalRows(rows, stems)
	for _, tc := range []struct {
		table       string
		schema      []string
		typed       [][]any
		plainValues func(int) []any
	}{
		{"memory", memorySchema, typedSent(t, memorySchema, memoryColumns(), rows), func(i int) []any { return plainMemory(rows[i]) }},
		{"memory_versions", versionsSchema, typedSent(t, versionsSchema, versionsColumns(), rows),
			func(i int) []any { return plainVersion(rows[i]) }},
		{"memory_embeddings", embeddingsSchema, typedSent(t, embeddingsSchema, embeddingsColumns(), rows),
			func(i int) []any { return plainEmbedding(rows[i]) }},
		{"memory_lexical", lexicalSchema, typedSent(t, lexicalSchema, lexicalColumns(), lexical),
			func(i int) []any { return plainLexical(lexical[i]) }},
		{"audit_log", auditSchema, typedSent(t, auditSchema, auditColumns(), audits), func(i int) []any { return plainAudit(audits[i]) }},
	} {
		var plain [][]any
		for i := range rows {
			plain = append(plain, tc.plainValues(i))
		}
		want := plainSent(t, tc.schema, plain)
		if len(tc.typed) != len(want) {
			t.Fatalf("%s: %d rows sent, want %d", tc.table, len(tc.typed), len(want))
		}
		for r := range want {
			for c := range want[r] {
				if !reflect.DeepEqual(tc.typed[r][c], want[r][c]) {
					t.Errorf("%s, column %s, row %d: %v, want %v", tc.table, tc.schema[c], r, tc.typed[r][c], want[r][c])
				}
			}
		}
	}
}

// A column the server types otherwise than the projector builds it is refused before
// anything is sent.
func TestTypedColumnsRefuseAnotherType(t *testing.T) {
	schema := append([]string(nil), embeddingsSchema...)
	schema[16] = "embedding_dim UInt32"
	b := newBlockBatch(t, schema...)
	if err := fillTyped(b, embeddingsColumns(), replayRows(2)); err == nil {
		t.Fatal("embedding_dim built as UInt16 into a UInt32 column: no error")
	}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func plainMemory(r opened) []any {
	v, c := r.env.Revision, r.content
	return []any{r.env.Org, r.env.Namespace, v.Agent, v.UserID, v.SessionID, c.MemoryKey, mustUUID(v.MemoryID),
		uint64(v.Version), uint64(r.env.Seq), v.MemoryType, v.Status, b2u(v.Tombstone), string(c.Value), v.ContentSHA256,
		orEmpty(c.Tags), orEmpty(c.Entities), float32(v.Confidence), uint32(v.ReinforcementCount), v.Actor, v.SourceClass,
		v.EmbeddingModel, uint16(v.EmbeddingDim), seconds(v.CreatedAt), seconds(v.UpdatedAt), seconds(r.env.CommittedAt),
		b2u(v.Pinned), b2u(v.Locked), sensitivity(v), secondsPtr(v.ValidAt), secondsPtr(v.ValidTo), secondsPtr(v.ExpiresAt),
		v.OnExpire, v.SupersededBy, v.DuplicateOf, orEmpty(v.ConflictWith), b2u(v.JudgementOwed), uint32(v.RecallCount),
		uint32(v.EvidenceCount)}
}

func plainVersion(r opened) []any {
	v, c := r.env.Revision, r.content
	return []any{r.env.Org, r.env.Namespace, v.Agent, v.UserID, v.SessionID, c.MemoryKey, uint64(v.Version),
		mustUUID(v.MemoryID), uint64(r.env.Seq), string(r.env.Type), v.Op, v.MemoryType, v.Status, b2u(v.Tombstone),
		string(c.Value), v.ContentSHA256, orEmpty(c.Tags), orEmpty(c.Entities), float32(v.Confidence),
		uint32(v.ReinforcementCount), v.Actor, v.SourceClass, seconds(v.CreatedAt), seconds(v.UpdatedAt),
		seconds(r.env.CommittedAt), b2u(v.Pinned), b2u(v.Locked), sensitivity(v), secondsPtr(v.ValidAt),
		secondsPtr(v.ValidTo), secondsPtr(v.ExpiresAt), v.OnExpire, v.SupersededBy, v.DuplicateOf,
		orEmpty(v.ConflictWith), b2u(v.JudgementOwed), uint32(v.RecallCount), uint32(v.EvidenceCount)}
}

func plainEmbedding(r opened) []any {
	v, c := r.env.Revision, r.content
	return []any{r.env.Org, r.env.Namespace, v.Agent, v.UserID, v.SessionID, c.MemoryKey,
		mustUUID(v.MemoryID), uint64(v.Version), uint64(r.env.Seq), v.MemoryType, v.Status, b2u(v.Tombstone),
		v.ContentSHA256, orEmpty(c.Tags), v.SourceClass, v.EmbeddingModel, uint16(len(c.Embedding)), orEmpty([]float32(c.Embedding)),
		seconds(v.UpdatedAt), b2u(v.Pinned), sensitivity(v), secondsPtr(v.ValidTo), secondsPtr(v.ExpiresAt),
		orEmpty([]float32(c.KeyEmbedding))}
}

func plainLexical(r lexicalRow) []any {
	v, c := r.env.Revision, r.content
	return []any{r.env.Org, r.env.Namespace, v.Agent, v.UserID, v.SessionID, c.MemoryKey, mustUUID(v.MemoryID),
		uint64(v.Version), uint64(r.env.Seq), v.MemoryType, v.Status, b2u(v.Tombstone), sensitivity(v), b2u(v.Pinned),
		v.ContentSHA256, orEmpty(c.Tags), secondsPtr(v.ExpiresAt), secondsPtr(v.ValidTo), seconds(v.UpdatedAt),
		orEmpty(r.terms), orEmpty(r.tfs), r.docLen, orEmpty(r.keyTerms)}
}

func plainAudit(r *auditRow) []any {
	c := r.Row
	return []any{c.Org, c.Namespace, c.Seq, c.Op, c.EventType, c.OccurredAt, c.Actor, c.Agent, r.userID,
		c.SessionID, r.memoryKey, mustUUID(c.MemoryID), c.Version, r.contentSHA256, c.SourceClass, c.Status, c.RequestID,
		c.PrevHash, c.RowHash, c.SubjectCommitment, r.subjectSalt, c.Detail, chainFormat(c)}
}
