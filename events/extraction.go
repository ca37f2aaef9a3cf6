package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DefaultExtractionTopic is the topic deferred extraction requests are published to
// unless configured otherwise. Its records are requests, not revisions: they carry no
// seq, and the extraction workers, a consumer group of the topic, turn each into the
// revisions of the facts it holds.
const DefaultExtractionTopic = "loom.extraction.requests.v1"

// ExtractionEnvelopeVersion is the version of the extraction topic's records, which
// moves apart from the revisions topic's EnvelopeVersion. Version 2 names the user by
// user_ref (UserRef under the org's key, as the revisions topic does from its version
// 2), not by user_id; a version 1 record, which carries user_id, still decodes.
// Version 3 names the agent and the session by agent_ref and session_ref (AgentRef,
// SessionRef, as the revisions topic does from its version 3); the sealed request
// holds them in the clear.
const ExtractionEnvelopeVersion = 3

// TypeExtractionRequested is the type of every record on the extraction topic.
const TypeExtractionRequested = "loom.extraction.requested"

// ExtractionRequest is the JSON value of one extraction topic record: a deferred
// memory.set_from_messages. Who asked and for which agent, user and session are plain,
// by reference only; the request itself (the transcript and its options, the agent,
// user id and session id it named) is sealed under the request's own data key,
// which Loom destroys once the request is done or erased, so the kept topic never
// yields the transcript again. Several records may carry one request (a retry after a
// backoff, a request taken over from a worker that stopped): a worker dedupes by
// queue_id against the authority.
type ExtractionRequest struct {
	Version     int       `json:"envelope_version"` // ExtractionEnvelopeVersion
	Type        string    `json:"type"`             // TypeExtractionRequested
	Org         string    `json:"org"`
	Namespace   string    `json:"namespace"`
	QueueID     string    `json:"queue_id"`
	Agent       string    `json:"agent,omitempty"`       // versions 1 and 2 only: the agent in the clear
	AgentRef    string    `json:"agent_ref,omitempty"`   // version 3 on: AgentRef of the agent
	UserRef     string    `json:"user_ref,omitempty"`    // version 2 on: UserRef of the user id
	UserID      string    `json:"user_id,omitempty"`     // version 1 only: the user id in the clear
	SessionID   string    `json:"session_id,omitempty"`  // versions 1 and 2 only: the session id in the clear
	SessionRef  string    `json:"session_ref,omitempty"` // version 3 on: SessionRef of the session id
	RequestedAt time.Time `json:"requested_at"`
	// Attempt counts the records of the request: 1 for the one queued with it.
	Attempt int     `json:"attempt"`
	Sealed  *Sealed `json:"sealed"`
}

// ExtractionAAD is the additional data a request's payload is sealed with, so a sealed
// payload cannot be moved to another request.
func ExtractionAAD(org, queueID string) string { return "extraction/" + org + "/" + queueID }

// SealExtraction seals a request's payload under its data key.
func SealExtraction(dataKey []byte, org, queueID string, payload []byte) (*Sealed, error) {
	return sealBytes(dataKey, ExtractionAAD(org, queueID), payload)
}

// OpenExtraction opens a request's payload. Every failure wraps ErrSealBroken.
func OpenExtraction(dataKey []byte, org, queueID string, s *Sealed) ([]byte, error) {
	return openBytes(dataKey, ExtractionAAD(org, queueID), s)
}

// EncodeExtraction validates r and returns its JSON, times in UTC.
func EncodeExtraction(r *ExtractionRequest) ([]byte, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: nil extraction request", ErrInvalidEnvelope)
	}
	out := *r
	out.RequestedAt = out.RequestedAt.UTC()
	if err := validateExtraction(&out); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEnvelope, err)
	}
	b, err := marshalJSON(&out)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEnvelope, err)
	}
	return b, nil
}

// DecodeExtraction parses and validates an extraction topic record value.
func DecodeExtraction(b []byte) (*ExtractionRequest, error) {
	var r ExtractionRequest
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEnvelope, err)
	}
	r.RequestedAt = r.RequestedAt.UTC()
	if err := validateExtraction(&r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEnvelope, err)
	}
	return &r, nil
}

// ExtractionHeaders are the CloudEvents headers of a request record, binary mode.
func ExtractionHeaders(r *ExtractionRequest, source string) []Header {
	return []Header{
		{Key: "ce_specversion", Value: []byte(CloudEventsSpecVersion)},
		{Key: "ce_id", Value: []byte(fmt.Sprintf("%s/%s/%d", r.Org, r.QueueID, r.Attempt))},
		{Key: "ce_source", Value: []byte(source)},
		{Key: "ce_type", Value: []byte(TypeExtractionRequested)},
		{Key: "ce_time", Value: []byte(r.RequestedAt.UTC().Format(time.RFC3339Nano))},
		{Key: "content-type", Value: []byte(ContentType)},
	}
}

func validateExtraction(r *ExtractionRequest) error {
	switch {
	case r.Version < 1 || r.Version > ExtractionEnvelopeVersion:
		return fmt.Errorf("envelope_version %d, want 1 to %d", r.Version, ExtractionEnvelopeVersion)
	case r.Version == 1 && r.UserRef != "":
		return fmt.Errorf("envelope_version 1 carries no user_ref")
	case r.Version >= 2 && r.UserID != "":
		return fmt.Errorf("envelope_version %d carries no user_id in the clear", r.Version)
	case r.Version >= 2 && !isSHA256Hex(r.UserRef):
		return fmt.Errorf("user_ref %q is not 64 lowercase hex digits", r.UserRef)
	case r.Type != TypeExtractionRequested:
		return fmt.Errorf("type %q, want %q", r.Type, TypeExtractionRequested)
	case !validSegment(r.Org):
		return fmt.Errorf("org %q is empty or contains '/'", r.Org)
	case !validSegment(r.Namespace):
		return fmt.Errorf("namespace %q is empty or contains '/'", r.Namespace)
	case !validSegment(r.QueueID):
		return fmt.Errorf("queue_id %q is empty or contains '/'", r.QueueID)
	case r.Attempt < 1:
		return fmt.Errorf("attempt %d, want >= 1", r.Attempt)
	case r.RequestedAt.IsZero():
		return errors.New("requested_at is not set")
	case r.Sealed == nil:
		return errors.New("a request needs its sealed payload")
	}
	if err := validateWriter(r.Version, r.Agent, r.SessionID, r.AgentRef, r.SessionRef); err != nil {
		return err
	}
	return validateSealed(r.Sealed)
}
