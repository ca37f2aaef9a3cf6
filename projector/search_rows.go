package projector

import (
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/text"
)

const columnsChunks = `org, namespace, agent, user_id, session_id, memory_key, chunk, memory_id,
	version, seq, memory_type, status, tombstone, sensitivity, content_sha256, expires_at, valid_to, text, embedding,
	embedding_dim`

// searchable reports whether a revision's row may be found by search at all: not
// deleted, not high, of a searchable type. Its lexical row is emptied otherwise.
func searchable(o opened) bool {
	r := o.env.Revision
	return !r.Tombstone && memrow.Sensitivity(r.Sensitivity) != memrow.SensitivityHigh && !memrow.NonSearchableTypes[r.MemoryType]
}

// lexicalRow is a revision's memory_lexical row: its terms are worked out once, for
// the three columns that hold them.
type lexicalRow struct {
	opened
	terms, keyTerms []string
	tfs             []uint16
	docLen          uint32
}

// lexicalRows are rows' lexical rows, their terms stemmed through stems; a row search
// may not find has none.
func lexicalRows(rows []opened, stems *text.Stems) []lexicalRow {
	out := make([]lexicalRow, len(rows))
	for i, r := range rows {
		out[i].opened = r
		if searchable(r) {
			out[i].terms, out[i].tfs, out[i].docLen = stems.TermFreqs(memrow.ValueText(r.content.Value))
			out[i].keyTerms = stems.Terms(memrow.KeyWords(r.content.MemoryKey))
		}
	}
	return out
}

// lexicalColumns are memory_lexical's, in the order its insert lists them.
func lexicalColumns() []typedColumn[lexicalRow] {
	return append(identityColumns(func(r lexicalRow) opened { return r.opened }),
		uuidCol("memory_id", func(r lexicalRow) uuid.UUID { return mustUUID(r.env.Revision.MemoryID) }),
		u64Col("version", func(r lexicalRow) uint64 { return uint64(r.env.Revision.Version) }),
		u64Col("seq", func(r lexicalRow) uint64 { return uint64(r.env.Seq) }),
		strCol("memory_type", func(r lexicalRow) string { return r.env.Revision.MemoryType }),
		strCol("status", func(r lexicalRow) string { return r.env.Revision.Status }),
		u8Col("tombstone", func(r lexicalRow) uint8 { return b2u(r.env.Revision.Tombstone) }),
		strCol("sensitivity", func(r lexicalRow) string { return sensitivity(r.env.Revision) }),
		u8Col("pinned", func(r lexicalRow) uint8 { return b2u(r.env.Revision.Pinned) }),
		strCol("content_sha256", func(r lexicalRow) string { return r.env.Revision.ContentSHA256 }),
		strsCol("tags", func(r lexicalRow) []string { return r.content.Tags }),
		nullTimeCol("expires_at", func(r lexicalRow) *time.Time { return secondsPtr(r.env.Revision.ExpiresAt) }),
		nullTimeCol("valid_to", func(r lexicalRow) *time.Time { return secondsPtr(r.env.Revision.ValidTo) }),
		timeCol("updated_at", func(r lexicalRow) time.Time { return seconds(r.env.Revision.UpdatedAt) }),
		strsCol("terms", func(r lexicalRow) []string { return r.terms }),
		u16sCol("tfs", func(r lexicalRow) []uint16 { return r.tfs }),
		u32Col("doc_len", func(r lexicalRow) uint32 { return r.docLen }),
		strsCol("key_terms", func(r lexicalRow) []string { return r.keyTerms }),
	)
}

// chunksFill writes the windows of the revisions that carry chunk vectors, and retires
// the indices past them (an earlier, longer value's windows). A chunk whose row has
// since moved on to other content is left in place: the chunk leg reads only chunks
// of the content a row's current search document holds.
func chunksFill(rows []opened) (func(driver.Batch) error, bool) {
	var chunked []opened
	for _, r := range rows {
		if len(r.content.ChunkEmbeddings) > 0 && searchable(r) {
			chunked = append(chunked, r)
		}
	}
	return func(b driver.Batch) error {
		var vecCells floatCells
		for _, r := range chunked {
			v, c := r.env.Revision, r.content
			windows := text.Chunks(memrow.ValueText(c.Value))
			for i := 0; i < text.MaxChunks; i++ {
				tomb, win, vec := uint8(1), "", []float32{}
				if i < len(windows) && i < len(c.ChunkEmbeddings) {
					tomb, win, vec = 0, windows[i], c.ChunkEmbeddings[i]
				}
				if err := b.Append(r.env.Org, r.env.Namespace, v.Agent, v.UserID, v.SessionID, c.MemoryKey, uint16(i),
					mustUUID(v.MemoryID), uint64(v.Version), uint64(r.env.Seq), v.MemoryType, v.Status, tomb, sensitivity(v),
					v.ContentSHA256, secondsPtr(v.ExpiresAt), secondsPtr(v.ValidTo), win, vecCells.of(vec), uint16(len(vec))); err != nil {
					return err
				}
			}
		}
		return nil
	}, len(chunked) > 0
}
