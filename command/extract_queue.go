package command

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/command/extraction"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/extractqueue"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
)

// A deferred memory.set_from_messages is committed as a sealed request: its row in
// loom.extraction_requests (internal/extractqueue) and its record on the extraction
// topic, in one transaction, the transcript sealed under a data key of its own as a
// revision's content is. The request topic rather than the revisions topic carries it:
// a request is no revision of any key, so it takes no seq of the namespace's and the
// projections never see it, while a worker group of its own consumes it. Its key lives
// on the row, which an erasure of the scope deletes, and a worker clears once the
// request is done: after either, neither the topic's copy nor the row's opens again.

// maxRequestRecordBytes bounds a request's record, under the broker's default message
// size (1 MiB) with room for its envelope.
const maxRequestRecordBytes = 900 << 10

// enqueue commits a deferred request and answers its queue_id.
func (s *Service) enqueue(ctx context.Context, p auth.Principal, ns string, id memrow.Identity, req *extraction.Request) (*fromMessagesAnswer, error) {
	run := *req
	run.Defer = nil
	payload, err := json.Marshal(&run)
	if err != nil {
		return nil, err
	}
	dataKey, err := events.NewDataKey()
	if err != nil {
		return nil, err
	}
	queueID := uuid.NewString()
	sealed, err := events.SealExtraction(dataKey, p.Org, queueID, payload)
	if err != nil {
		return nil, err
	}
	stored, err := json.Marshal(sealed)
	if err != nil {
		return nil, err
	}
	q := extractqueue.Queued{Org: p.Org, Namespace: ns, QueueID: queueID, Agent: id.Agent, UserID: id.UserID, SessionID: id.SessionID,
		CreatedAt: s.now(), Records: 1, Payload: stored}
	rec, err := s.requestRecord(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(rec.Value) > maxRequestRecordBytes {
		return nil, httperr.New(http.StatusRequestEntityTooLarge, httperr.CodePayloadTooLarge,
			fmt.Sprintf("the sealed request is %d bytes; a deferred request holds at most %d: send a shorter transcript, or run it inline",
				len(rec.Value), maxRequestRecordBytes))
	}
	storedKey, err := s.storedKey(dataKey)
	if err != nil {
		return nil, err
	}
	// The row names its agent and session by reference; they are sealed under a key of
	// the row's own, which outlives the request's (cleared when it is done).
	whoKey, err := events.NewDataKey()
	if err != nil {
		return nil, err
	}
	who, err := extractqueue.SealWho(whoKey, id.Agent, id.SessionID)
	if err != nil {
		return nil, err
	}
	storedWhoKey, err := s.storedKey(whoKey)
	if err != nil {
		return nil, err
	}
	err = pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		return extractqueue.Enqueue(ctx, tx, extractqueue.NewRequest{Org: p.Org, Namespace: ns, QueueID: queueID,
			Agent: id.Agent, UserID: id.UserID, SessionID: id.SessionID, TokenID: p.TokenID, TokenRole: p.Role, ReadUser: p.ReadUserID,
			DataKey: storedKey, Payload: stored, WhoKey: storedWhoKey, Who: who, Messages: len(req.Messages)}, rec)
	})
	if err != nil {
		return nil, httperr.Store("committing the extraction request", err)
	}
	return &fromMessagesAnswer{&extraction.Answer{Namespace: ns, Agent: id.Agent, UserID: id.UserID, SessionID: id.SessionID, Deferred: true,
		QueueID: queueID, Status: extractqueue.StatusPending, Facts: []extraction.Fact{}, Forgotten: []extraction.Forgotten{},
		Superseded: []string{}, Steps: []extraction.StepReport{}}}, nil
}

// requestRecord is the extraction topic record of a request: its plain fields, the
// user, agent and session by reference (events.UserRef, AgentRef, SessionRef), and the
// sealed payload as its row keeps it.
func (s *Service) requestRecord(ctx context.Context, q extractqueue.Queued) (outbox.Record, error) {
	refKey, err := s.userRefs.Current(ctx, q.Org)
	if err != nil {
		return outbox.Record{}, err
	}
	refs, err := writerRefsOf(refKey.Key, q.UserID, q.Agent, q.SessionID)
	if err != nil {
		return outbox.Record{}, fmt.Errorf("name the request's writer: %w", err)
	}
	var sealed events.Sealed
	if err := json.Unmarshal(q.Payload, &sealed); err != nil {
		return outbox.Record{}, fmt.Errorf("decode the sealed request %s: %w", q.QueueID, err)
	}
	r := &events.ExtractionRequest{Version: events.ExtractionEnvelopeVersion, Type: events.TypeExtractionRequested, Org: q.Org,
		Namespace: q.Namespace, QueueID: q.QueueID, AgentRef: refs.agent, UserRef: refs.user, SessionRef: refs.session,
		RequestedAt: q.CreatedAt, Attempt: q.Records, Sealed: &sealed}
	value, err := events.EncodeExtraction(r)
	if err != nil {
		return outbox.Record{}, err
	}
	headers, err := json.Marshal(headerPairs(append(events.ExtractionHeaders(r, s.cfg.EventSource), events.RefGenerationHeader(refKey.Gen)...)))
	if err != nil {
		return outbox.Record{}, err
	}
	// A request takes no seq of its namespace: 0 marks the row as no revision's.
	return outbox.Record{Org: q.Org, Namespace: q.Namespace, Topic: s.cfg.Extraction.Topic,
		Key: events.RecordKey(q.Org, q.Namespace), Headers: headers, Value: value}, nil
}

// retryRequest is the body of memory.extraction_retry_mine.
type retryRequest struct {
	QueueIDs []string `json:"queue_ids"`
}

type retryAnswer struct {
	Accepted []string `json:"accepted"`
	Ignored  []string `json:"ignored"`
}

// retryExtractions is memory.extraction_retry_mine: the caller's own failed requests
// among queue_ids get one more attempt, with their payload and identity as they were,
// and a new record each; the others (not the caller's, not failed, erased) are ignored.
func (s *Service) retryExtractions(ctx context.Context, p auth.Principal, req retryRequest) (*retryAnswer, error) {
	if len(req.QueueIDs) == 0 || len(req.QueueIDs) > MaxBulkEntries {
		return nil, httperr.Validation("queue_ids", fmt.Sprintf("queue_ids must hold 1 to %d ids", MaxBulkEntries))
	}
	for _, id := range req.QueueIDs {
		if _, err := uuid.Parse(id); err != nil {
			return nil, httperr.Validation("queue_ids", "a queue_id is a UUID")
		}
	}
	accepted, err := extractqueue.Retry(ctx, s.pool, p.Org, p.TokenID, req.QueueIDs, s.cfg.Extraction.MaxAttempts, s.RequestRecords(ctx))
	if err != nil {
		return nil, httperr.Store("retrying the extraction requests", err)
	}
	ans := &retryAnswer{Accepted: []string{}, Ignored: []string{}}
	done := map[string]bool{}
	for _, id := range accepted {
		done[id] = true
		ans.Accepted = append(ans.Accepted, id)
	}
	for _, id := range req.QueueIDs {
		if !done[id] {
			ans.Ignored = append(ans.Ignored, id)
		}
	}
	return ans, nil
}
