package command

import (
	"encoding/json"
	"fmt"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/outbox"
)

// revisionRecord is what the topic carries for one committed revision.
type revisionRecord struct {
	row          *memrow.Row
	op           string
	verdict      string // the own row's verdict (events.Revision.Verdict); ""
	event        events.Type
	prevVersion  int64
	requestID    string
	vector       []float32
	keyVector    []float32
	chunkVectors [][]float32
	// userRefKey is the org's user reference key (events.UserRef), refGen its
	// generation (the record's ce_loomrefgen).
	userRefKey []byte
	refGen     int
	// The trace context of the request that wrote it (tracing.Context): the record's
	// ce_traceparent and ce_tracestate. "": none.
	traceparent, tracestate string
	// audit is the write's own audit row, on the last record of its commit (nil: none).
	audit *events.AuditNote
}

// encodeRecord seals the revision's content under dataKey and returns the record value
// (the envelope) and its CloudEvents headers as the outbox stores them: what a
// republish from the journal queues.
func encodeRecord(r revisionRecord, dataKey []byte, source string) (value, headers []byte, err error) {
	return encodeEnvelope(r, dataKey, source, func(c *events.Content) (*events.Sealed, error) {
		return events.Seal(dataKey, events.RecordID(r.row.Org, r.row.Namespace, r.row.Seq), c)
	})
}

// encodeReference is encodeRecord for a revision the commit journals in the same
// transaction: the envelope with outbox.StubSealed for its content, and its vectors
// sealed under dataKey, which the relay seals with the journal's text when it
// publishes (outbox.Complete), into the bytes encodeRecord gives.
func encodeReference(r revisionRecord, dataKey []byte, source string) (value, headers, vectors []byte, err error) {
	value, headers, err = encodeEnvelope(r, dataKey, source, func(*events.Content) (*events.Sealed, error) {
		return outbox.StubSealed(), nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	vectors, err = outbox.SealVectors(dataKey, r.vectors())
	return value, headers, vectors, err
}

func (r revisionRecord) vectors() outbox.Vectors {
	return outbox.Vectors{Embedding: r.vector, KeyEmbedding: r.keyVector, Chunks: r.chunkVectors}
}

// encodeEnvelope builds the revision's envelope, its content sealed by seal, and its
// headers.
func encodeEnvelope(r revisionRecord, dataKey []byte, source string, seal func(*events.Content) (*events.Sealed, error)) (value, headers []byte, err error) {
	row := r.row
	recordID := events.RecordID(row.Org, row.Namespace, row.Seq)
	rev, err := revisionOf(row, r.userRefKey, r.op, r.verdict, r.prevVersion, r.requestID)
	if err != nil {
		return nil, nil, err
	}
	content := outbox.RevisionContent(row, r.vectors(), dataKey)
	sealed, err := seal(content)
	if err != nil {
		return nil, nil, fmt.Errorf("seal revision content: %w", err)
	}
	env := &events.Envelope{
		Version: events.EnvelopeVersion, ID: recordID, Type: r.event,
		Org: row.Org, Namespace: row.Namespace, Seq: row.Seq, CommittedAt: row.UpdatedAt,
		Revision: rev,
		Sealed:   sealed,
		Audit:    r.audit,
	}
	env.Revision.SubjectCommitment = auditchain.WriterSubjectCommitment(content.SubjectSalt, row.MemoryKey, row.ContentSHA256, row.UserID,
		row.Agent, row.SessionID)
	value, err = events.Encode(env)
	if err != nil {
		return nil, nil, fmt.Errorf("encode envelope: %w", err)
	}
	hs := append(events.CloudEventHeaders(env, source), events.TraceHeaders(r.traceparent, r.tracestate)...)
	headers, err = json.Marshal(headerPairs(append(hs, events.RefGenerationHeader(r.refGen)...)))
	if err != nil {
		return nil, nil, err
	}
	return value, headers, nil
}

// revisionOf is the plain fields of a revision's row as the topic carries them: the
// user, the agent and the session by their references under the org's user reference
// key (envelope version 3), the content digest only sealed.
func revisionOf(row *memrow.Row, userRefKey []byte, op, verdict string, prevVersion int64, requestID string) (*events.Revision, error) {
	refs, err := writerRefsOf(userRefKey, row.UserID, row.Agent, row.SessionID)
	if err != nil {
		return nil, fmt.Errorf("name the revision's writer: %w", err)
	}
	return &events.Revision{
		Op: op, Verdict: verdict, MemoryID: row.MemoryID, Version: row.Version, PrevVersion: prevVersion,
		AgentRef: refs.agent, UserRef: refs.user, SessionRef: refs.session,
		MemoryType: row.MemoryType, Status: string(row.Status), Tombstone: row.Tombstone,
		Confidence: row.Confidence, ReinforcementCount: row.ReinforcementCount, RecallCount: row.RecallCount, EvidenceCount: row.EvidenceCount,
		Actor: row.Actor, SourceClass: row.SourceClass, EmbeddingModel: row.EmbeddingModel, EmbeddingDim: row.EmbeddingDim,
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, RequestID: requestID,
		Pinned: row.Pinned, Locked: row.Locked, Sensitivity: string(row.Sensitivity), ValidAt: row.ValidAt, ValidTo: row.ValidTo,
		ExpiresAt: row.ExpiresAt, OnExpire: row.OnExpire, SupersededBy: row.SupersededBy, DuplicateOf: row.DuplicateOf,
		ConflictWith: row.ConflictWith, JudgementOwed: row.JudgementOwed,
	}, nil
}

// writerRefs are a writer identity's references, as the topic's plain fields name it.
type writerRefs struct{ user, agent, session string }

// writerRefsOf names a user, an agent and a session by reference under the org's user
// reference key (events.UserRef, AgentRef, SessionRef).
func writerRefsOf(userRefKey []byte, userID, agent, session string) (writerRefs, error) {
	var r writerRefs
	var err error
	if r.user, err = events.UserRef(userRefKey, userID); err != nil {
		return r, err
	}
	if r.agent, err = events.AgentRef(userRefKey, agent); err != nil {
		return r, err
	}
	r.session, err = events.SessionRef(userRefKey, session)
	return r, err
}

// headerPairs is how the outbox stores headers: an ordered list of [key, value].
func headerPairs(hs []events.Header) [][2]string {
	out := make([][2]string, len(hs))
	for i, h := range hs {
		out[i] = [2]string{h.Key, string(h.Value)}
	}
	return out
}
