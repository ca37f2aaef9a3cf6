package auditchain

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// The subject commitment binds an audit row's key, content hash and user id (the
// fields an erasure scrubs; on a FormatWriter row its agent and session id too) into
// the chain without chaining the fields themselves.
//
// The writer commits to the three fields under a salt: SHA-256 over the salt and the
// fields, length-prefixed. The commitment rides in the clear on the record (Revision.
// SubjectCommitment) and the chain hashes it, so a replay writes it unchanged whether
// or not it can open the record. The salt is derived from the revision's data key and
// rides sealed (Content.SubjectSalt); the projector writes it beside the fields, and an
// erasure scrubs it with them. So, while a row keeps its fields, a verifier recomputes
// the commitment and finds any of the three changed; once the erasure scrubbed them,
// the commitment, chained, stays and cannot be opened: without the salt no dictionary
// of guessed keys or user ids confirms what was erased (the data key that derives the
// salt is destroyed with the scope's other keys).

// SubjectSalt is a revision's commitment salt: HMAC-SHA256 of the record id under the
// revision's data key, 16 bytes in hex. Derived, not drawn, so a republish of the record
// from the journal (the same data key) carries the same commitment.
func SubjectSalt(dataKey []byte, recordID string) string {
	m := hmac.New(sha256.New, dataKey)
	m.Write([]byte("loom.audit.subject\x00" + recordID))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// SubjectCommitment commits to a revision's key, content hash and user id under salt:
// the commitment of a FormatV1 row.
func SubjectCommitment(salt, memoryKey, contentSHA256, userID string) string {
	return commit("loom.audit.subject.v1", salt, memoryKey, contentSHA256, userID)
}

// WriterSubjectCommitment commits to a revision's key, content hash, user id, agent and
// session id under salt: the commitment of a FormatWriter row, which a record of
// envelope version 3 on carries.
func WriterSubjectCommitment(salt, memoryKey, contentSHA256, userID, agent, sessionID string) string {
	return commit("loom.audit.subject.v2", salt, memoryKey, contentSHA256, userID, agent, sessionID)
}

func commit(fields ...string) string {
	h := sha256.New()
	var buf []byte
	for _, s := range fields {
		buf = strconv.AppendInt(buf[:0], int64(len(s)), 10)
		buf = append(buf, ':')
		buf = append(buf, s...)
		buf = append(buf, ',')
		h.Write(buf)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Subject is an audit row's scrubbable fields and their salt, as stored.
type Subject struct {
	MemoryKey, ContentSHA256, UserID, Salt string
}

// scrubbed: an erasure blanked the fields and the salt.
func (s Subject) scrubbed() bool {
	return s.MemoryKey == "" && s.ContentSHA256 == "" && s.UserID == "" && s.Salt == ""
}

// subjectScrubbed reports whether an erasure blanked the row's subject: its key,
// content hash, user id and salt, and on a FormatWriter row its agent and session id.
func subjectScrubbed(r Row) bool {
	return r.Subject.scrubbed() && (r.Format != FormatWriter || (r.Agent == "" && r.SessionID == ""))
}

// checkSubject is why a row's subject fields fail their commitment ("" when they hold).
func checkSubject(r Row) string {
	s, writer := r.Subject, r.Format == FormatWriter
	switch {
	case writer && r.SubjectCommitment == "" && (r.Agent != "" || r.SessionID != ""):
		// Outside the hash and under no commitment, they would be anyone's to change.
		return "the row names an agent or a session under no subject commitment: they were added"
	case r.SubjectCommitment == "" || subjectScrubbed(r):
		return "" // a row written before commitments, or one an erasure scrubbed
	case s.Salt == "":
		return "the row keeps a key, content hash, user id, agent or session but not the salt they were committed under: its subject was changed"
	case !writer && SubjectCommitment(s.Salt, s.MemoryKey, s.ContentSHA256, s.UserID) != r.SubjectCommitment:
		return "the row's key, content hash and user id do not match their subject commitment: the row was changed"
	case writer && WriterSubjectCommitment(s.Salt, s.MemoryKey, s.ContentSHA256, s.UserID, r.Agent, r.SessionID) != r.SubjectCommitment:
		return "the row's key, content hash, user id, agent and session do not match their subject commitment: the row was changed"
	}
	return ""
}
