package projector

import (
	"time"

	"github.com/google/uuid"
)

// The columns of a revision's rows, named as the tables name them (after every
// migration; ClickHouse 18.16 needs the list, and it keeps an insert valid when a
// later migration adds a column), in the order each statement lists them.

// identityColumns are the columns every row table leads with: the row's key, read
// from the revision each row R holds (of).
func identityColumns[R any](of func(R) opened) []typedColumn[R] {
	return []typedColumn[R]{
		strCol("org", func(r R) string { return of(r).env.Org }),
		strCol("namespace", func(r R) string { return of(r).env.Namespace }),
		strCol("agent", func(r R) string { return of(r).env.Revision.Agent }),
		strCol("user_id", func(r R) string { return of(r).env.Revision.UserID }),
		strCol("session_id", func(r R) string { return of(r).env.Revision.SessionID }),
		strCol("memory_key", func(r R) string { return of(r).content.MemoryKey }),
	}
}

// itself is a row of the tables whose rows are the revisions themselves.
func itself(r opened) opened { return r }

// stateColumns are the columns memory and memory_versions share after their
// identity, version and event columns: the row's state.
func stateColumns() []typedColumn[opened] {
	return []typedColumn[opened]{
		strCol("memory_type", func(r opened) string { return r.env.Revision.MemoryType }),
		strCol("status", func(r opened) string { return r.env.Revision.Status }),
		u8Col("tombstone", func(r opened) uint8 { return b2u(r.env.Revision.Tombstone) }),
		strCol("value", func(r opened) string { return string(r.content.Value) }),
		strCol("content_sha256", func(r opened) string { return r.env.Revision.ContentSHA256 }),
		strsCol("tags", func(r opened) []string { return r.content.Tags }),
		strsCol("entities", func(r opened) []string { return r.content.Entities }),
		f32Col("confidence", func(r opened) float32 { return float32(r.env.Revision.Confidence) }),
		u32Col("reinforcement_count", func(r opened) uint32 { return uint32(r.env.Revision.ReinforcementCount) }),
		strCol("actor", func(r opened) string { return r.env.Revision.Actor }),
		strCol("source_class", func(r opened) string { return r.env.Revision.SourceClass }),
	}
}

// lifeColumns are the columns memory and memory_versions share at their end: times,
// flags and the row's relations to others.
func lifeColumns() []typedColumn[opened] {
	return []typedColumn[opened]{
		timeCol("created_at", func(r opened) time.Time { return seconds(r.env.Revision.CreatedAt) }),
		timeCol("updated_at", func(r opened) time.Time { return seconds(r.env.Revision.UpdatedAt) }),
		timeCol("committed_at", func(r opened) time.Time { return seconds(r.env.CommittedAt) }),
		u8Col("pinned", func(r opened) uint8 { return b2u(r.env.Revision.Pinned) }),
		u8Col("locked", func(r opened) uint8 { return b2u(r.env.Revision.Locked) }),
		strCol("sensitivity", func(r opened) string { return sensitivity(r.env.Revision) }),
		nullTimeCol("valid_at", func(r opened) *time.Time { return secondsPtr(r.env.Revision.ValidAt) }),
		nullTimeCol("valid_to", func(r opened) *time.Time { return secondsPtr(r.env.Revision.ValidTo) }),
		nullTimeCol("expires_at", func(r opened) *time.Time { return secondsPtr(r.env.Revision.ExpiresAt) }),
		strCol("on_expire", func(r opened) string { return r.env.Revision.OnExpire }),
		strCol("superseded_by", func(r opened) string { return r.env.Revision.SupersededBy }),
		strCol("duplicate_of", func(r opened) string { return r.env.Revision.DuplicateOf }),
		strsCol("conflict_with", func(r opened) []string { return r.env.Revision.ConflictWith }),
		u8Col("judgement_owed", func(r opened) uint8 { return b2u(r.env.Revision.JudgementOwed) }),
		u32Col("recall_count", func(r opened) uint32 { return uint32(r.env.Revision.RecallCount) }),
		u32Col("evidence_count", func(r opened) uint32 { return uint32(r.env.Revision.EvidenceCount) }),
	}
}

// memoryColumns are memory's: the current row of every key.
func memoryColumns() []typedColumn[opened] {
	cols := identityColumns(itself)
	cols = append(cols,
		uuidCol("memory_id", func(r opened) uuid.UUID { return mustUUID(r.env.Revision.MemoryID) }),
		u64Col("version", func(r opened) uint64 { return uint64(r.env.Revision.Version) }),
		u64Col("seq", func(r opened) uint64 { return uint64(r.env.Seq) }))
	cols = append(cols, stateColumns()...)
	cols = append(cols,
		strCol("embedding_model", func(r opened) string { return r.env.Revision.EmbeddingModel }),
		u16Col("embedding_dim", func(r opened) uint16 { return uint16(r.env.Revision.EmbeddingDim) }))
	return append(cols, lifeColumns()...)
}

// versionsColumns are memory_versions': every version of every key.
func versionsColumns() []typedColumn[opened] {
	cols := identityColumns(itself)
	cols = append(cols,
		u64Col("version", func(r opened) uint64 { return uint64(r.env.Revision.Version) }),
		uuidCol("memory_id", func(r opened) uuid.UUID { return mustUUID(r.env.Revision.MemoryID) }),
		u64Col("seq", func(r opened) uint64 { return uint64(r.env.Seq) }),
		strCol("event_type", func(r opened) string { return string(r.env.Type) }),
		strCol("op", func(r opened) string { return r.env.Revision.Op }))
	cols = append(cols, stateColumns()...)
	return append(cols, lifeColumns()...)
}

// embeddingsColumns are memory_embeddings': the search documents. Every revision
// replaces its key's document: one without a vector (a tombstone, a row that is not
// embedded) retires the older vector.
func embeddingsColumns() []typedColumn[opened] {
	cols := identityColumns(itself)
	return append(cols,
		uuidCol("memory_id", func(r opened) uuid.UUID { return mustUUID(r.env.Revision.MemoryID) }),
		u64Col("version", func(r opened) uint64 { return uint64(r.env.Revision.Version) }),
		u64Col("seq", func(r opened) uint64 { return uint64(r.env.Seq) }),
		strCol("memory_type", func(r opened) string { return r.env.Revision.MemoryType }),
		strCol("status", func(r opened) string { return r.env.Revision.Status }),
		u8Col("tombstone", func(r opened) uint8 { return b2u(r.env.Revision.Tombstone) }),
		strCol("content_sha256", func(r opened) string { return r.env.Revision.ContentSHA256 }),
		strsCol("tags", func(r opened) []string { return r.content.Tags }),
		strCol("source_class", func(r opened) string { return r.env.Revision.SourceClass }),
		strCol("embedding_model", func(r opened) string { return r.env.Revision.EmbeddingModel }),
		u16Col("embedding_dim", func(r opened) uint16 { return uint16(len(r.content.Embedding)) }),
		floatsCol("embedding", func(r opened) []float32 { return r.content.Embedding }),
		timeCol("updated_at", func(r opened) time.Time { return seconds(r.env.Revision.UpdatedAt) }),
		u8Col("pinned", func(r opened) uint8 { return b2u(r.env.Revision.Pinned) }),
		strCol("sensitivity", func(r opened) string { return sensitivity(r.env.Revision) }),
		nullTimeCol("valid_to", func(r opened) *time.Time { return secondsPtr(r.env.Revision.ValidTo) }),
		nullTimeCol("expires_at", func(r opened) *time.Time { return secondsPtr(r.env.Revision.ExpiresAt) }),
		floatsCol("key_embedding", func(r opened) []float32 { return r.content.KeyEmbedding }))
}
