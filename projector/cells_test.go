package projector

import (
	"reflect"
	"testing"
)

// The embeddings' block built through the cells holds, column by column and row by
// row, what the block of the same rows appended as plain values (the vectors and tags
// as slices) holds, empty arrays included: what reaches ClickHouse is unchanged.
func TestEmbeddingsFillHoldsThePlainValues(t *testing.T) {
	rows := replayRows(3)
	rows[1].content.Embedding, rows[1].content.KeyEmbedding, rows[1].content.Tags = nil, nil, nil
	viaCells := newBlockBatch(t, embeddingColumns...)
	if err := embeddingsFill(rows)(viaCells); err != nil {
		t.Fatal(err)
	}
	plain := newBlockBatch(t, embeddingColumns...)
	for _, r := range rows {
		v, c := r.env.Revision, r.content
		vec, key := []float32(c.Embedding), []float32(c.KeyEmbedding)
		if vec == nil {
			vec = []float32{}
		}
		if key == nil {
			key = []float32{}
		}
		if err := plain.Append(r.env.Org, r.env.Namespace, v.Agent, v.UserID, v.SessionID, c.MemoryKey,
			mustUUID(v.MemoryID), uint64(v.Version), uint64(r.env.Seq), v.MemoryType, v.Status, b2u(v.Tombstone),
			v.ContentSHA256, nonNil(c.Tags), v.SourceClass, v.EmbeddingModel, uint16(len(vec)), vec,
			seconds(v.UpdatedAt), b2u(v.Pinned), sensitivity(v), secondsPtr(v.ValidTo), secondsPtr(v.ExpiresAt), key); err != nil {
			t.Fatal(err)
		}
	}
	if viaCells.block.Rows() != len(rows) || plain.block.Rows() != len(rows) {
		t.Fatalf("%d and %d rows, want %d", viaCells.block.Rows(), plain.block.Rows(), len(rows))
	}
	for i, col := range plain.block.Columns {
		for r := range rows {
			if got, want := viaCells.block.Columns[i].Row(r, false), col.Row(r, false); !reflect.DeepEqual(got, want) {
				t.Errorf("column %s, row %d: %v, want %v", col.Name(), r, got, want)
			}
		}
	}
	if n := len(viaCells.block.Columns[17].Row(1, false).([]float32)); n != 0 {
		t.Errorf("row without a vector: %d floats", n)
	}
}
