package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrInvalidEnvelope is wrapped by every Encode and Decode failure, so a consumer can
// tell a malformed record (park it) from a failure of its own.
var ErrInvalidEnvelope = errors.New("events: invalid envelope")

// Envelope is the JSON value of one record.
type Envelope struct {
	Version     int       `json:"envelope_version"` // EnvelopeVersion; Decode reads MinEnvelopeVersion on
	ID          string    `json:"id"`               // RecordID(org, namespace, seq)
	Type        Type      `json:"type"`
	Org         string    `json:"org"`
	Namespace   string    `json:"namespace"`
	Seq         int64     `json:"seq"` // the namespace generation, >= 1
	CommittedAt time.Time `json:"committed_at"`
	Revision    *Revision `json:"revision,omitempty"` // plain fields; present iff Type.IsRevision()
	Sealed      *Sealed   `json:"sealed,omitempty"`   // sealed Content; present iff Revision is
	// Added within v1 (additive): what an erasure or a redaction did.
	Erasure   *Erasure   `json:"erasure,omitempty"`   // only on TypeErased; Loom always sets it there
	Redaction *Redaction `json:"redaction,omitempty"` // only on TypeRedacted; Loom always sets it there
	// Added within v2 (additive): a knowledge document revision's plain fields; present
	// iff Type.IsDocument(), with Sealed holding its DocumentContent.
	Document *Document `json:"document,omitempty"`
	Turns    *Turns    `json:"turns,omitempty"` // only on TypeTurnsObserved; Loom always sets it there
	Usage    *Usage    `json:"usage,omitempty"` // only on TypeUsageRecorded; Loom always sets it there
	// Added within v2 (additive): the audit row of the write whose last record this is
	// (a bulk write's batch, a conflict resolver's decision), on a revision; or an
	// erasure saga's transition (AuditErasure), on a memory.erased or loom.audited record.
	Audit *AuditNote `json:"audit,omitempty"`
}

// Erasure is what a memory.erased record carries: the erasure request, its scope in
// this namespace, and the generation it fenced. The scope's records below Generation
// are erased: their data keys are destroyed, and those not yet published were
// withdrawn, so their seqs never arrive. A consumer treats every seq below this
// record's that it has not seen as handled.
type Erasure struct {
	ID    string `json:"id"`    // the erasure request (GET /v1/erasures/{id})
	Scope string `json:"scope"` // ErasureScopeUser or ErasureScopeNamespace
	// UserRef is the keyed digest (UserRef) of the user whose memories were erased
	// (scope user), as the user's revisions carry it; version 2 on.
	UserRef string `json:"user_ref,omitempty"`
	// UserID is that user's id in the clear: only on a record written before version 2.
	UserID string `json:"user_id,omitempty"`
	Purge  bool   `json:"purge"` // the scope's audit trail was deleted too, not only scrubbed
	// Generation is the namespace generation the erasure advanced to: this record's seq.
	Generation int64 `json:"generation"`
	// Withdrawn counts the scope's records taken out of the outbox before they were
	// published: seqs below Generation that never arrive.
	Withdrawn int64 `json:"withdrawn"`
}

// Erasure scopes within one namespace.
const (
	ErasureScopeUser      = "user"      // one user's memories
	ErasureScopeNamespace = "namespace" // every memory of the namespace
)

// Redaction is what a memory.redacted record carries: the versions of the memory
// (Revision.MemoryID) whose text was scrubbed and whose data keys were destroyed.
type Redaction struct {
	// Versions are the named version first, then the later versions of its key that
	// copied its text.
	Versions []int64 `json:"versions"`
	// Withdrawal is set on the redactions of an erasure's withdrawal of a promoted copy
	// (a shared row promoted from the erased user's or namespace's memories): the
	// projection drops the copy's rows below the record, not only their text, as the
	// erasure drops its scope's own (the copy's key is as much the erased memory's).
	Withdrawal *Withdrawal `json:"withdrawal,omitempty"`
}

// Withdrawal is what an erasure's withdrawal of a promoted copy asks of the projection.
type Withdrawal struct {
	// Purge: the copy's audit rows go too, as the erasure's purge takes its scope's,
	// rather than being scrubbed of their key, content hash and user.
	Purge bool `json:"purge"`
}

// Revision holds the plain (unsealed) fields of a committed memory revision.
//
// From version 2 on, the user id and the content digest are sealed (Content.UserID,
// Content.ContentSHA256) and UserRef stands for the user in the clear; UserID and
// ContentSHA256 here are set only on a record written before (version 1), or by a
// follower that opened the content (revisions.Open lifts them in).
//
// From version 3 on, the agent and the session id are sealed too (Content.Agent,
// Content.SessionID) and AgentRef and SessionRef stand for them in the clear; Agent and
// SessionID here are set only on a record written before (versions 1 and 2), or by a
// follower that opened the content (Opened).
type Revision struct {
	Op                 string    `json:"op"` // e.g. "memory.set"
	MemoryID           string    `json:"memory_id"`
	Version            int64     `json:"version"`               // wall-clock ns, strictly above PrevVersion
	PrevVersion        int64     `json:"prev_version"`          // 0 for a key's first revision
	Agent              string    `json:"agent,omitempty"`       // versions 1 and 2 only
	AgentRef           string    `json:"agent_ref,omitempty"`   // version 3 on: AgentRef of the agent
	UserRef            string    `json:"user_ref,omitempty"`    // version 2 on: UserRef of the user id
	UserID             string    `json:"user_id,omitempty"`     // version 1 only
	SessionID          string    `json:"session_id,omitempty"`  // versions 1 and 2 only
	SessionRef         string    `json:"session_ref,omitempty"` // version 3 on: SessionRef of the session id
	MemoryType         string    `json:"memory_type"`
	Status             string    `json:"status"`
	Tombstone          bool      `json:"tombstone"`
	ContentSHA256      string    `json:"content_sha256,omitempty"` // version 1 only: 64 lowercase hex
	Confidence         float64   `json:"confidence"`
	ReinforcementCount int       `json:"reinforcement_count"`
	RecallCount        int       `json:"recall_count,omitempty"`   // added within v2 (additive): search's served hits, folded
	EvidenceCount      int       `json:"evidence_count,omitempty"` // added within v2 (additive): evidence events (restatements, merges, duplicates), folded
	Verdict            string    `json:"verdict,omitempty"`        // added within v2 (additive): what the write's admission made of its own row (new, restatement, duplicate, refines, conflict)
	Actor              string    `json:"actor"`
	SourceClass        string    `json:"source_class"`
	EmbeddingModel     string    `json:"embedding_model,omitempty"`
	EmbeddingDim       int       `json:"embedding_dim"`
	CreatedAt          time.Time `json:"created_at"`
	UpdatedAt          time.Time `json:"updated_at"`
	RequestID          string    `json:"request_id,omitempty"`
	// Added within v1 (additive): state a notification consumer can act on.
	Pinned        bool       `json:"pinned,omitempty"`
	Locked        bool       `json:"locked,omitempty"`
	Sensitivity   string     `json:"sensitivity,omitempty"`
	ValidAt       *time.Time `json:"valid_at,omitempty"`
	ValidTo       *time.Time `json:"valid_to,omitempty"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	OnExpire      string     `json:"on_expire,omitempty"`
	SupersededBy  string     `json:"superseded_by,omitempty"`
	DuplicateOf   string     `json:"duplicate_of,omitempty"`
	ConflictWith  []string   `json:"conflict_with,omitempty"`
	JudgementOwed bool       `json:"judgement_owed,omitempty"`
	// SubjectCommitment commits to the revision's key, content hash and user id (from
	// version 3 on its agent and session id too) under the sealed Content.SubjectSalt
	// (internal/auditchain, subject.go): the audit chain hashes it, so an erasure that
	// scrubs them leaves the chain whole.
	SubjectCommitment string `json:"subject_commitment,omitempty"`
}

// Encode validates e and returns its JSON, with every time in UTC. e is not modified.
func Encode(e *Envelope) ([]byte, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil envelope", ErrInvalidEnvelope)
	}
	out := normalised(e)
	if err := validate(out); err != nil {
		return nil, err
	}
	b, err := marshalJSON(out)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEnvelope, err)
	}
	return b, nil
}

// Decode parses and validates a record value. Unknown fields are ignored because the
// topic evolves additively within v1.
func Decode(b []byte) (*Envelope, error) {
	e, err := unmarshal[Envelope](b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEnvelope, err)
	}
	normalise(e)
	if err := validate(e); err != nil {
		return nil, err
	}
	return e, nil
}

// normalise puts e's times in UTC in place: e is its own, freshly decoded, so what
// normalised copies is left where it is (a replay decodes millions).
func normalise(e *Envelope) {
	e.CommittedAt = e.CommittedAt.UTC()
	if r := e.Revision; r != nil {
		r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
		for _, t := range []*time.Time{r.ValidAt, r.ValidTo, r.ExpiresAt} {
			if t != nil {
				*t = t.UTC()
			}
		}
	}
	if d := e.Document; d != nil {
		d.CreatedAt, d.UpdatedAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// normalised returns a copy of e with its times in UTC, leaving the caller's value alone.
func normalised(e *Envelope) *Envelope {
	out := *e
	out.CommittedAt = out.CommittedAt.UTC()
	if e.Revision != nil {
		r := *e.Revision
		r.CreatedAt = r.CreatedAt.UTC()
		r.UpdatedAt = r.UpdatedAt.UTC()
		r.ValidAt, r.ValidTo, r.ExpiresAt = utcPtr(r.ValidAt), utcPtr(r.ValidTo), utcPtr(r.ExpiresAt)
		out.Revision = &r
	}
	if e.Document != nil {
		d := *e.Document
		d.CreatedAt, d.UpdatedAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC()
		out.Document = &d
	}
	return &out
}

func validate(e *Envelope) error {
	if err := validateEnvelope(e); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidEnvelope, err)
	}
	return nil
}

func validateEnvelope(e *Envelope) error {
	switch {
	case e.Version < MinEnvelopeVersion || e.Version > EnvelopeVersion:
		return fmt.Errorf("envelope_version %d, want %d to %d", e.Version, MinEnvelopeVersion, EnvelopeVersion)
	case !validSegment(e.Org):
		return fmt.Errorf("org %q is empty or contains '/'", e.Org)
	case !validSegment(e.Namespace):
		return fmt.Errorf("namespace %q is empty or contains '/'", e.Namespace)
	case e.Seq < 1:
		return fmt.Errorf("seq %d, want >= 1", e.Seq)
	case e.ID != RecordID(e.Org, e.Namespace, e.Seq):
		return fmt.Errorf("id %q does not match org/namespace/seq %q", e.ID, RecordID(e.Org, e.Namespace, e.Seq))
	case !e.Type.Valid():
		return fmt.Errorf("unknown type %q", e.Type)
	case e.CommittedAt.IsZero():
		return errors.New("committed_at is not set")
	}
	if err := validateAttachments(e); err != nil {
		return err
	}
	if e.Type.IsDocument() {
		switch {
		case e.Revision != nil:
			return fmt.Errorf("type %q carries no memory revision", e.Type)
		case e.Document == nil || e.Sealed == nil:
			return fmt.Errorf("type %q needs a document and sealed content", e.Type)
		}
		if err := validateDocument(e.Document); err != nil {
			return fmt.Errorf("document: %v", err)
		}
		if err := validateSealed(e.Sealed); err != nil {
			return fmt.Errorf("sealed: %v", err)
		}
		return nil
	}
	if e.Document != nil {
		return fmt.Errorf("type %q carries no document", e.Type)
	}
	if !e.Type.IsRevision() {
		if e.Revision != nil || e.Sealed != nil {
			return fmt.Errorf("type %q carries no revision or sealed content", e.Type)
		}
		return nil
	}
	if e.Revision == nil {
		return fmt.Errorf("type %q needs a revision", e.Type)
	}
	if e.Sealed == nil {
		return fmt.Errorf("type %q needs sealed content", e.Type)
	}
	if err := validateRevision(e.Version, e.Revision); err != nil {
		return fmt.Errorf("revision: %v", err)
	}
	if err := validateSealed(e.Sealed); err != nil {
		return fmt.Errorf("sealed: %v", err)
	}
	return nil
}

// validateAttachments checks the fields a single type carries: an erasure only on
// memory.erased, a redaction only on memory.redacted. Neither is required, so a
// record written before they were added still decodes.
func validateAttachments(e *Envelope) error {
	switch {
	case e.Erasure != nil && e.Type != TypeErased:
		return fmt.Errorf("type %q carries no erasure", e.Type)
	case e.Redaction != nil && e.Type != TypeRedacted:
		return fmt.Errorf("type %q carries no redaction", e.Type)
	case e.Turns != nil && e.Type != TypeTurnsObserved:
		return fmt.Errorf("type %q carries no turns", e.Type)
	case e.Type == TypeTurnsObserved && e.Turns == nil:
		return fmt.Errorf("type %q needs turns", e.Type)
	case e.Type == TypeAudited && e.Audit == nil:
		return fmt.Errorf("type %q needs an audit note", e.Type)
	case e.Usage != nil && e.Type != TypeUsageRecorded:
		return fmt.Errorf("type %q carries no usage", e.Type)
	case e.Type == TypeUsageRecorded && e.Usage == nil:
		return fmt.Errorf("type %q needs usage", e.Type)
	}
	if x := e.Usage; x != nil {
		if err := validateUsage(x); err != nil {
			return fmt.Errorf("usage: %v", err)
		}
	}
	if e.Audit != nil {
		if err := validateAudit(e); err != nil {
			return err
		}
	}
	if x := e.Turns; x != nil {
		if err := validateTurns(e.Version, x); err != nil {
			return fmt.Errorf("turns: %v", err)
		}
	}
	if x := e.Erasure; x != nil {
		switch {
		case x.ID == "":
			return errors.New("erasure: id is empty")
		case x.Scope != ErasureScopeUser && x.Scope != ErasureScopeNamespace:
			return fmt.Errorf("erasure: scope %q, want %q or %q", x.Scope, ErasureScopeUser, ErasureScopeNamespace)
		case e.Version == 1 && x.UserRef != "":
			return errors.New("erasure: envelope_version 1 carries no user_ref")
		case e.Version == 1 && (x.Scope == ErasureScopeUser) != (x.UserID != ""):
			return fmt.Errorf("erasure: scope %q with user_id %q", x.Scope, x.UserID)
		case e.Version >= 2 && x.UserID != "":
			return fmt.Errorf("erasure: envelope_version %d carries no user_id in the clear", e.Version)
		case e.Version >= 2 && (x.Scope == ErasureScopeUser) != (x.UserRef != ""):
			return fmt.Errorf("erasure: scope %q with user_ref %q", x.Scope, x.UserRef)
		case x.UserRef != "" && !isSHA256Hex(x.UserRef):
			return fmt.Errorf("erasure: user_ref %q is not 64 lowercase hex digits", x.UserRef)
		case x.Generation != e.Seq:
			return fmt.Errorf("erasure: generation %d is not the record's seq %d", x.Generation, e.Seq)
		case x.Withdrawn < 0:
			return fmt.Errorf("erasure: withdrawn %d is negative", x.Withdrawn)
		}
	}
	if r := e.Redaction; r != nil {
		if len(r.Versions) == 0 {
			return errors.New("redaction: no versions")
		}
		for _, v := range r.Versions {
			if v < 1 {
				return fmt.Errorf("redaction: version %d, want >= 1", v)
			}
		}
	}
	return nil
}

func validateRevision(version int, r *Revision) error {
	if version == 1 {
		switch {
		case !isSHA256Hex(r.ContentSHA256):
			return fmt.Errorf("content_sha256 %q is not 64 lowercase hex digits", r.ContentSHA256)
		case r.UserRef != "":
			return errors.New("envelope_version 1 carries no user_ref")
		}
	} else {
		switch {
		case r.UserID != "" || r.ContentSHA256 != "":
			return fmt.Errorf("envelope_version %d carries no user_id or content_sha256 in the clear", version)
		case !isSHA256Hex(r.UserRef):
			return fmt.Errorf("user_ref %q is not 64 lowercase hex digits", r.UserRef)
		}
	}
	if err := validateWriter(version, r.Agent, r.SessionID, r.AgentRef, r.SessionRef); err != nil {
		return err
	}
	switch {
	case r.Op == "":
		return errors.New("op is empty")
	case r.MemoryID == "":
		return errors.New("memory_id is empty")
	case r.PrevVersion < 0:
		return fmt.Errorf("prev_version %d is negative", r.PrevVersion)
	case r.Version <= r.PrevVersion:
		return fmt.Errorf("version %d is not above prev_version %d", r.Version, r.PrevVersion)
	case r.ReinforcementCount < 0:
		return fmt.Errorf("reinforcement_count %d is negative", r.ReinforcementCount)
	case r.EmbeddingDim < 0:
		return fmt.Errorf("embedding_dim %d is negative", r.EmbeddingDim)
	}
	return nil
}

// validateWriter checks how a record names its writer: in the clear before version 3,
// by reference (a writer reference, or "" or "-" for none) from it on.
func validateWriter(version int, agent, session, agentRef, sessionRef string) error {
	if version < 3 {
		if agentRef != "" || sessionRef != "" {
			return fmt.Errorf("envelope_version %d carries no agent_ref or session_ref", version)
		}
		return nil
	}
	switch {
	case agent != "" || session != "":
		return fmt.Errorf("envelope_version %d carries no agent or session_id in the clear", version)
	case !isWriterRef(agentRef):
		return fmt.Errorf("agent_ref %q is not 64 lowercase hex digits, \"-\" or empty", agentRef)
	case !isWriterRef(sessionRef):
		return fmt.Errorf("session_ref %q is not 64 lowercase hex digits, \"-\" or empty", sessionRef)
	}
	return nil
}

// isWriterRef reports whether s is what AgentRef or SessionRef answers.
func isWriterRef(s string) bool { return s == "" || s == "-" || isSHA256Hex(s) }

func validateSealed(s *Sealed) error {
	switch {
	case s.Alg != SealAlg:
		return fmt.Errorf("alg %q, want %q", s.Alg, SealAlg)
	case len(s.Nonce) != nonceSize:
		return fmt.Errorf("nonce is %d bytes, want %d", len(s.Nonce), nonceSize)
	case len(s.Ciphertext) < tagSize:
		return fmt.Errorf("ciphertext is %d bytes, shorter than the %d-byte tag", len(s.Ciphertext), tagSize)
	}
	return nil
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func validSegment(s string) bool {
	return s != "" && !strings.Contains(s, "/")
}

// marshalJSON is json.Marshal without HTML escaping, so memory text such as "<b>" is
// carried as written rather than as \u003cb\u003e.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
