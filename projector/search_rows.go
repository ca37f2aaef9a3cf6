package projector

import (
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/text"
)

const (
	columnsLexical = `org, namespace, agent, user_id, session_id, memory_key, memory_id, version,
		seq, memory_type, status, tombstone, sensitivity, pinned, content_sha256, tags, expires_at, valid_to, updated_at, terms,
		tfs, doc_len, key_terms`
	columnsChunks = `org, namespace, agent, user_id, session_id, memory_key, chunk, memory_id,
		version, seq, memory_type, status, tombstone, sensitivity, content_sha256, expires_at, valid_to, text, embedding,
		embedding_dim`
)

// searchable reports whether a revision's row may be found by search at all: not
// deleted, not high, of a searchable type. Its lexical row is emptied otherwise.
func searchable(o opened) bool {
	r := o.env.Revision
	return !r.Tombstone && memrow.Sensitivity(r.Sensitivity) != memrow.SensitivityHigh && !memrow.NonSearchableTypes[r.MemoryType]
}

func lexicalFill(rows []opened, stems *text.Stems) func(driver.Batch) error {
	return func(b driver.Batch) error {
		var tags, termCells, keyCells stringCells
		for _, r := range rows {
			v, c := r.env.Revision, r.content
			terms, tfs, docLen := []string{}, []uint16{}, uint32(0)
			keyTerms := []string{}
			if searchable(r) {
				terms, tfs, docLen = stems.TermFreqs(memrow.ValueText(c.Value))
				keyTerms = stems.Terms(memrow.KeyWords(c.MemoryKey))
				if keyTerms == nil {
					keyTerms = []string{}
				}
			}
			if err := b.Append(r.env.Org, r.env.Namespace, v.Agent, v.UserID, v.SessionID, c.MemoryKey, mustUUID(v.MemoryID),
				uint64(v.Version), uint64(r.env.Seq), v.MemoryType, v.Status, b2u(v.Tombstone), sensitivity(v), b2u(v.Pinned),
				v.ContentSHA256, tags.of(c.Tags), secondsPtr(v.ExpiresAt), secondsPtr(v.ValidTo), seconds(v.UpdatedAt),
				termCells.of(terms), tfs, docLen, keyCells.of(keyTerms)); err != nil {
				return err
			}
		}
		return nil
	}
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
