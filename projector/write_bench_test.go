package projector

import (
	"fmt"
	"strings"
	"testing"
	"time"

	chproto "github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
	"github.com/google/uuid"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/text"
)

// blockBatch builds an insert's block as the driver does, with no server: Append and
// Columns are what a fill uses, and Flush encodes the block into buf as the driver does
// to send it, then resets it.
type blockBatch struct {
	driver.Batch
	block *proto.Block
	buf   *chproto.Buffer
}

func (b blockBatch) Append(v ...any) error { return b.block.Append(v...) }

func (b blockBatch) Columns() []column.Interface { return b.block.Columns }

func (b blockBatch) Rows() int { return b.block.Rows() }

func (b blockBatch) Flush() error {
	b.buf.Reset()
	if err := b.block.Encode(b.buf, 54460); err != nil {
		return err
	}
	b.block.Reset()
	return nil
}

// newBlockBatch is an empty block of the columns, "name Type" each.
func newBlockBatch(tb testing.TB, columns ...string) blockBatch {
	b := proto.NewBlock()
	for _, c := range columns {
		name, typ, _ := strings.Cut(c, " ")
		if err := b.AddColumn(name, column.Type(typ)); err != nil {
			tb.Fatal(err)
		}
	}
	return blockBatch{block: b, buf: new(chproto.Buffer)}
}

// The tables' columns as the migrations leave them (schemas/clickhouse), in the order
// the projector's inserts list them.
var (
	memorySchema = []string{"org String", "namespace String", "agent String", "user_id String", "session_id String",
		"memory_key String", "memory_id UUID", "version UInt64", "seq UInt64", "memory_type String", "status String",
		"tombstone UInt8", "value String", "content_sha256 String", "tags Array(String)", "entities Array(String)",
		"confidence Float32", "reinforcement_count UInt32", "actor String", "source_class String", "embedding_model String",
		"embedding_dim UInt16", "created_at DateTime", "updated_at DateTime", "committed_at DateTime", "pinned UInt8",
		"locked UInt8", "sensitivity String", "valid_at Nullable(DateTime)", "valid_to Nullable(DateTime)",
		"expires_at Nullable(DateTime)", "on_expire String", "superseded_by String", "duplicate_of String",
		"conflict_with Array(String)", "judgement_owed UInt8", "recall_count UInt32", "evidence_count UInt32"}
	versionsSchema = []string{"org String", "namespace String", "agent String", "user_id String", "session_id String",
		"memory_key String", "version UInt64", "memory_id UUID", "seq UInt64", "event_type String", "op String",
		"memory_type String", "status String", "tombstone UInt8", "value String", "content_sha256 String",
		"tags Array(String)", "entities Array(String)", "confidence Float32", "reinforcement_count UInt32", "actor String",
		"source_class String", "created_at DateTime", "updated_at DateTime", "committed_at DateTime", "pinned UInt8",
		"locked UInt8", "sensitivity String", "valid_at Nullable(DateTime)", "valid_to Nullable(DateTime)",
		"expires_at Nullable(DateTime)", "on_expire String", "superseded_by String", "duplicate_of String",
		"conflict_with Array(String)", "judgement_owed UInt8", "recall_count UInt32", "evidence_count UInt32"}
	embeddingsSchema = []string{"org String", "namespace String", "agent String", "user_id String", "session_id String",
		"memory_key String", "memory_id UUID", "version UInt64", "seq UInt64", "memory_type String", "status String",
		"tombstone UInt8", "content_sha256 String", "tags Array(String)", "source_class String", "embedding_model String",
		"embedding_dim UInt16", "embedding Array(Float32)", "updated_at DateTime", "pinned UInt8", "sensitivity String",
		"valid_to Nullable(DateTime)", "expires_at Nullable(DateTime)", "key_embedding Array(Float32)"}
	lexicalSchema = []string{"org String", "namespace String", "agent String", "user_id String", "session_id String",
		"memory_key String", "memory_id UUID", "version UInt64", "seq UInt64", "memory_type String", "status String",
		"tombstone UInt8", "sensitivity String", "pinned UInt8", "content_sha256 String", "tags Array(String)",
		"expires_at Nullable(DateTime)", "valid_to Nullable(DateTime)", "updated_at DateTime", "terms Array(String)",
		"tfs Array(UInt16)", "doc_len UInt32", "key_terms Array(String)"}
	auditSchema = []string{"org String", "namespace String", "seq UInt64", "op String", "event_type String",
		"occurred_at DateTime", "actor String", "agent String", "user_id String", "session_id String", "memory_key String",
		"memory_id UUID", "version UInt64", "content_sha256 String", "source_class String", "status String",
		"request_id String", "prev_hash String", "row_hash String", "subject_commitment String", "subject_salt String",
		"detail String", "chain_format UInt8"}
)

// replayRows are n opened revisions as a replay's batch holds them: two 384-dim
// vectors and a sentence each.
func replayRows(n int) []opened {
	rows := make([]opened, n)
	now := time.Now()
	for i := range rows {
		vec, key := make(events.Vector, 384), make(events.Vector, 384)
		for j := range vec {
			vec[j], key[j] = float32(i+j)/1000, float32(i-j)/1000
		}
		rows[i] = opened{
			env: &events.Envelope{Org: "acme", Namespace: "ns", Seq: int64(i + 1), CommittedAt: now, Revision: &events.Revision{
				MemoryID: uuid.NewString(), Version: int64(i + 1), Agent: "-", UserID: "-", SessionID: "-", MemoryType: "fact",
				Status: "active", SourceClass: "direct", EmbeddingModel: "hash-v1-384", EmbeddingDim: 384, UpdatedAt: now}},
			content: &events.Content{MemoryKey: fmt.Sprintf("user.pref.%d", i), Tags: []string{"bench"}, Embedding: vec, KeyEmbedding: key,
				Value: []byte(fmt.Sprintf("%q", fmt.Sprintf("user %d prefers the aisle seat on flights over %d hours", i, i%13)))},
		}
	}
	return rows
}

// BenchmarkFillEmbeddings builds and encodes memory_embeddings' block of a 5,000-row
// batch, sent on every flushRows rows: the driver's work a replay's largest insert
// costs before the server.
func BenchmarkFillEmbeddings(b *testing.B) {
	rows := replayRows(5000)
	benchTyped(b, embeddingsSchema, embeddingsColumns, func() []opened { return rows })
}

// BenchmarkFillLexical is the same for memory_lexical (the terms stemmed, memoised).
func BenchmarkFillLexical(b *testing.B) {
	rows, stems := replayRows(5000), text.NewStems(stemMemo)
	benchTyped(b, lexicalSchema, lexicalColumns, func() []lexicalRow { return lexicalRows(rows, stems) })
}

// BenchmarkFillRows builds and encodes the blocks of all five inserts a replay's
// 5,000-record batch sends (memory, memory_versions, memory_embeddings,
// memory_lexical, audit_log): the projector's share of an insert's CPU.
func BenchmarkFillRows(b *testing.B) {
	rows, stems := replayRows(5000), text.NewStems(stemMemo)
	audits := make([]*auditRow, len(rows))
	for i, o := range rows {
		audits[i] = revisionAudit(o.env, o.content)
	}
	b.ReportAllocs()
	for b.Loop() {
		blocks := []blockBatch{newBlockBatch(b, memorySchema...), newBlockBatch(b, versionsSchema...),
			newBlockBatch(b, embeddingsSchema...), newBlockBatch(b, lexicalSchema...), newBlockBatch(b, auditSchema...)}
		for _, err := range []error{
			fillTyped(blocks[0], memoryColumns(), rows),
			fillTyped(blocks[1], versionsColumns(), rows),
			fillTyped(blocks[2], embeddingsColumns(), rows),
			fillTyped(blocks[3], lexicalColumns(), lexicalRows(rows, stems)),
			fillTyped(blocks[4], auditColumns(), audits),
		} {
			if err != nil {
				b.Fatal(err)
			}
		}
		for _, bl := range blocks {
			if err := bl.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchTyped[R any](b *testing.B, schema []string, columns func() []typedColumn[R], rows func() []R) {
	b.ReportAllocs()
	for b.Loop() {
		block := newBlockBatch(b, schema...)
		if err := fillTyped(block, columns(), rows()); err != nil {
			b.Fatal(err)
		}
		if err := block.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
