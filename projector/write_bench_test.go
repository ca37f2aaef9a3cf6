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

// blockBatch builds an insert's block as the driver does, with no server: Append is
// all a fill calls, and Flush encodes the block into buf as the driver does to send
// it, then resets it.
type blockBatch struct {
	driver.Batch
	block *proto.Block
	buf   *chproto.Buffer
}

func (b blockBatch) Append(v ...any) error { return b.block.Append(v...) }

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

// embeddingColumns are memory_embeddings' columns as the migrations leave them, in
// columnsEmbeddings' order.
var embeddingColumns = []string{"org String", "namespace String", "agent String", "user_id String", "session_id String",
	"memory_key String", "memory_id UUID", "version UInt64", "seq UInt64", "memory_type String", "status String",
	"tombstone UInt8", "content_sha256 String", "tags Array(String)", "source_class String", "embedding_model String",
	"embedding_dim UInt16", "embedding Array(Float32)", "updated_at DateTime", "pinned UInt8", "sensitivity String",
	"valid_to Nullable(DateTime)", "expires_at Nullable(DateTime)", "key_embedding Array(Float32)"}

// lexicalColumns are memory_lexical's, in columnsLexical's order.
var lexicalColumns = []string{"org String", "namespace String", "agent String", "user_id String", "session_id String",
	"memory_key String", "memory_id UUID", "version UInt64", "seq UInt64", "memory_type String", "status String",
	"tombstone UInt8", "sensitivity String", "pinned UInt8", "content_sha256 String", "tags Array(String)",
	"expires_at Nullable(DateTime)", "valid_to Nullable(DateTime)", "updated_at DateTime", "terms Array(String)",
	"tfs Array(UInt16)", "doc_len UInt32", "key_terms Array(String)"}

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
// batch: the driver's work a replay's largest insert costs before the server. The
// whole block at once, as before flushRows, and sent on every flushRows rows.
func BenchmarkFillEmbeddings(b *testing.B) {
	benchFill(b, embeddingColumns, embeddingsFill(replayRows(5000)))
}

// BenchmarkFillLexical is the same for memory_lexical (the terms stemmed, memoised).
func BenchmarkFillLexical(b *testing.B) {
	benchFill(b, lexicalColumns, lexicalFill(replayRows(5000), text.NewStems(stemMemo)))
}

func benchFill(b *testing.B, columns []string, fill func(driver.Batch) error) {
	for _, flushed := range []bool{false, true} {
		b.Run(fmt.Sprintf("flushed=%v", flushed), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				block := newBlockBatch(b, columns...)
				var batch driver.Batch = block
				if flushed {
					batch = &flushing{Batch: block}
				}
				if err := fill(batch); err != nil {
					b.Fatal(err)
				}
				if err := block.Flush(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
