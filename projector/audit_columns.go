package projector

import (
	"time"

	"github.com/google/uuid"
)

// auditColumns are audit_log's, in the order its insert lists them.
func auditColumns() []typedColumn[*auditRow] {
	return []typedColumn[*auditRow]{
		strCol("org", func(r *auditRow) string { return r.Org }),
		strCol("namespace", func(r *auditRow) string { return r.Namespace }),
		u64Col("seq", func(r *auditRow) uint64 { return r.Seq }),
		strCol("op", func(r *auditRow) string { return r.Op }),
		strCol("event_type", func(r *auditRow) string { return r.EventType }),
		timeCol("occurred_at", func(r *auditRow) time.Time { return r.OccurredAt }),
		strCol("actor", func(r *auditRow) string { return r.Actor }),
		strCol("agent", func(r *auditRow) string { return r.Agent }),
		strCol("user_id", func(r *auditRow) string { return r.userID }),
		strCol("session_id", func(r *auditRow) string { return r.SessionID }),
		strCol("memory_key", func(r *auditRow) string { return r.memoryKey }),
		uuidCol("memory_id", func(r *auditRow) uuid.UUID { return mustUUID(r.MemoryID) }),
		u64Col("version", func(r *auditRow) uint64 { return r.Version }),
		strCol("content_sha256", func(r *auditRow) string { return r.contentSHA256 }),
		strCol("source_class", func(r *auditRow) string { return r.SourceClass }),
		strCol("status", func(r *auditRow) string { return r.Status }),
		strCol("request_id", func(r *auditRow) string { return r.RequestID }),
		strCol("prev_hash", func(r *auditRow) string { return r.PrevHash }),
		strCol("row_hash", func(r *auditRow) string { return r.RowHash }),
		strCol("subject_commitment", func(r *auditRow) string { return r.SubjectCommitment }),
		strCol("subject_salt", func(r *auditRow) string { return r.subjectSalt }),
		strCol("detail", func(r *auditRow) string { return r.Detail }),
		u8Col("chain_format", func(r *auditRow) uint8 { return chainFormat(r.Row) }),
	}
}
