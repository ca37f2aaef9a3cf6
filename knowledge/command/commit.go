package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/knowledge/store"
)

// plan is one source's revision in a commit: a new version's content (doc), or a
// delete or restore of the head read (from).
type plan struct {
	op    string
	event events.Type
	uri   string
	user  string // the user it is written for ("" the namespace's): the head's, if any
	read  int64  // the head version the writer read; 0: it read none
	doc   *prepared
	from  *store.Head // a delete's or a restore's head, with its text
}

// Written is what a commit did to one source.
type Written struct {
	SourceURI string `json:"source_uri"`
	DocID     string `json:"doc_id"`
	Version   int64  `json:"version"`
	// VersionText is Version in decimal, for clients whose numbers are doubles.
	VersionText string `json:"version_text"`
	PrevVersion int64  `json:"prev_version"`
	Revision    int64  `json:"revision"` // the record's seq in its namespace
	Event       string `json:"event"`
	Format      string `json:"format"`
	Deleted     bool   `json:"deleted"`
	ChunkCount  int    `json:"chunk_count"`
	Bytes       int64  `json:"bytes"`
	// UserID is the user the document is written for (absent: the namespace's).
	UserID string `json:"user_id,omitempty"`
	// Unchanged is an upsert whose content and description were the head's already:
	// nothing was committed, and the head is answered.
	Unchanged bool `json:"unchanged,omitempty"`
}

// commit commits plans in one transaction: the namespace's generation advanced (its
// row lock orders the namespace's records and holds an erasure off), the sources'
// heads locked in key order and each checked against the version its writer read,
// then every head, revision key and topic record written. A head that moved refuses
// the whole commit (409 PRECONDITION_FAILED) and nothing is written.
func (s *Service) commit(ctx context.Context, p auth.Principal, ns string, plans []*plan) ([]Written, error) {
	return s.commitWith(ctx, p, ns, plans, nil)
}

// guard is what a commit runs in its transaction once its revisions are queued on b,
// with what it is about to write: an ingestion run's progress, an Idempotency-Key's
// mark. It may queue statements on b, which go with the writes and the COMMIT, or run
// its own in tx. An error refuses the whole commit.
type guard func(ctx context.Context, tx pgx.Tx, b *pgx.Batch, written []Written) error

// commitWith is commit with guard run in its transaction (nil: none).
func (s *Service) commitWith(ctx context.Context, p auth.Principal, ns string, plans []*plan, g guard) ([]Written, error) {
	return s.commitFenced(ctx, p, ns, plans, nil, g)
}

// commitFenced is commitWith with fence queued in the commit's first batch, after
// the heads' locks (nil: none): an ingestion run's fence, whose refusal (an error of
// the batch's results) writes nothing. The commit takes two round trips while it
// holds the namespace's generation lock: the BEGIN with the advance, the locks and the
// fence, then the writes with the COMMIT (pg.InPipelinedTx), and a guard's own
// statements between, if it runs any. With no plans it advances and locks nothing and
// commits the fence and the guard's statements alone.
func (s *Service) commitFenced(ctx context.Context, p auth.Principal, ns string, plans []*plan, fence func(*pgx.Batch), g guard) ([]Written, error) {
	uris := make([]string, len(plans))
	for i, pl := range plans {
		uris[i] = pl.uri
	}
	refs, err := s.userRefs(ctx, p.Org, plans)
	if err != nil {
		return nil, err
	}
	var out []Written
	err = pg.InPipelinedTx(ctx, s.pool, func(tx pgx.Tx) (*pgx.Batch, error) {
		out = out[:0]
		n := int64(len(plans))
		var gen int64
		heads := map[string]*store.Head{}
		b := &pgx.Batch{}
		if n > 0 {
			generations.QueueAdvance(b, p.Org, ns, n, &gen)
			store.QueueLock(b, p.Org, ns, uris, heads)
		}
		if fence != nil {
			fence(b)
		}
		// The fence's refusal is read here, before anything is written: the batch that
		// goes with the COMMIT must hold nothing that another check could still refuse.
		if b.Len() > 0 {
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				if fenced(err) {
					return nil, err
				}
				return nil, fmt.Errorf("advance the namespace's generation and lock the heads: %w", err)
			}
		}
		b = &pgx.Batch{}
		now := time.Now().UTC()
		for i, pl := range plans {
			cur := heads[pl.uri]
			var curVersion int64
			if cur != nil {
				curVersion = cur.Version
			}
			if curVersion != pl.read {
				return nil, s.moved(ctx, tx, p.Org, ns, pl, curVersion)
			}
			if cur != nil && cur.UserID != pl.user {
				return nil, sourceTaken(pl.uri)
			}
			w, err := s.queueRevision(b, p, ns, pl, cur, gen-n+1+int64(i), now, refs[pl.user])
			if err != nil {
				return nil, err
			}
			out = append(out, w)
		}
		if g != nil {
			if err := g(ctx, tx, b, out); err != nil {
				return nil, err
			}
		}
		if n > 0 {
			outbox.QueueNotify(b)
		}
		return b, nil
	})
	if err != nil {
		if errors.Is(err, idempotency.ErrTakenOver) {
			return nil, idempotency.TakenOver(err)
		}
		if fenced(err) {
			return nil, err
		}
		return nil, httperr.Store("committing the documents", err)
	}
	if s.wake != nil && len(plans) > 0 {
		s.wake.Queued()
	}
	return out, nil
}

// moved is the refusal of a plan whose head is not at the version its writer read:
// 404 when an erasure removed that version (or the document a delete or a restore
// read), so a write built from an erased document never lands; 409 otherwise.
func (s *Service) moved(ctx context.Context, tx pgx.Tx, org, ns string, pl *plan, now int64) error {
	var docID string
	if pl.from != nil {
		docID = pl.from.DocID
	}
	if pl.read != 0 || docID != "" {
		erased, err := store.Erased(ctx, tx, org, ns, pl.uri, pl.read, docID)
		if err != nil {
			return err
		}
		if erased {
			return documentErased(pl.uri)
		}
	}
	return headMoved(pl.uri, pl.read, now)
}

// queueRevision queues one plan's head, key and record at seq over cur (nil: none);
// user is the topic's reference of the plan's user (the zero value for none).
func (s *Service) queueRevision(b *pgx.Batch, p auth.Principal, ns string, pl *plan, cur *store.Head, seq int64, now time.Time, user userRef) (Written, error) {
	var prev int64
	h := &store.Head{Org: p.Org, Namespace: ns, SourceURI: pl.uri, Seq: seq, Actor: p.Actor(), UserID: pl.user, CreatedAt: now, UpdatedAt: now}
	if cur != nil {
		prev, h.CreatedAt = cur.Version, cur.CreatedAt
	}
	// Every writer stamps its version past the head's, so a host whose clock runs
	// behind still writes above it.
	h.Version = max(now.UnixNano(), prev+1)
	var text *store.Text
	content := &events.DocumentContent{SourceURI: pl.uri, UserID: pl.user}
	var model string
	var dim int
	if d := pl.doc; d != nil {
		// A new version takes a fresh id: an id names one version's content.
		h.DocID, h.Format, h.ChunkCount, h.Bytes = uuid.NewString(), d.format, len(d.chunks), int64(len(d.text.Body))
		h.ChunksSeq, h.ChunksVersion = seq, h.Version
		text, content.Chunks, model, dim = &d.text, d.chunks, d.model, d.dim
	} else {
		// A delete or a restore keeps the content and the chunks the head serves.
		f := pl.from
		h.DocID, h.Format, h.ChunkCount, h.Bytes = f.DocID, f.Format, f.ChunkCount, f.Bytes
		h.ChunksSeq, h.ChunksVersion = f.ChunksSeq, f.ChunksVersion
		h.Deleted = pl.event == events.TypeDocumentDeleted
		text = f.Text
	}
	content.Title, content.ContentType, content.Tags, content.Metadata = text.Title, text.ContentType, nonNil(text.Tags), text.Metadata
	dataKey, err := events.NewDataKey()
	if err != nil {
		return Written{}, err
	}
	stored := dataKey
	if s.keys != nil {
		if stored, err = s.keys.Wrap(dataKey); err != nil {
			return Written{}, fmt.Errorf("wrap the revision's key: %w", err)
		}
	}
	sealed, err := store.Seal(text, dataKey)
	if err != nil {
		return Written{}, err
	}
	store.QueueWrite(b, h, pl.event, stored, sealed)
	recordID := events.RecordID(p.Org, ns, seq)
	sealedContent, err := events.SealDocument(dataKey, recordID, content)
	if err != nil {
		return Written{}, err
	}
	env := &events.Envelope{Version: events.EnvelopeVersion, ID: recordID, Type: pl.event, Org: p.Org, Namespace: ns, Seq: seq,
		CommittedAt: now, Sealed: sealedContent, Document: &events.Document{
			Op: pl.op, DocID: h.DocID, Version: h.Version, PrevVersion: prev, Format: h.Format, Deleted: h.Deleted,
			ChunkCount: len(content.Chunks), Actor: h.Actor, UserRef: user.ref, Bytes: h.Bytes, CreatedAt: h.CreatedAt, UpdatedAt: now,
			EmbeddingModel: model, EmbeddingDim: dim}}
	value, err := events.Encode(env)
	if err != nil {
		return Written{}, fmt.Errorf("encode the document record: %w", err)
	}
	if s.cfg.MaxRecordBytes > 0 && len(value) > s.cfg.MaxRecordBytes {
		return Written{}, recordTooLarge(pl.uri, len(value), len(content.Chunks), s.cfg.MaxRecordBytes)
	}
	headers, err := json.Marshal(headerPairs(append(events.CloudEventHeaders(env, s.cfg.EventSource), events.RefGenerationHeader(user.gen)...)))
	if err != nil {
		return Written{}, err
	}
	outbox.Queue(b, outbox.Record{Org: p.Org, Namespace: ns, Seq: seq, Topic: s.cfg.Topic,
		Key: events.RecordKey(p.Org, ns), Headers: headers, Value: value})
	return Written{SourceURI: pl.uri, DocID: h.DocID, Version: h.Version, VersionText: strconv.FormatInt(h.Version, 10), PrevVersion: prev, Revision: seq, Event: string(pl.event),
		Format: h.Format, Deleted: h.Deleted, ChunkCount: h.ChunkCount, Bytes: h.Bytes, UserID: pl.user}, nil
}

// headerPairs is how the outbox stores headers: an ordered list of [key, value].
func headerPairs(hs []events.Header) [][2]string {
	out := make([][2]string, len(hs))
	for i, h := range hs {
		out[i] = [2]string{h.Key, string(h.Value)}
	}
	return out
}

// readHead reads a source's head with its text (nil when it has none).
func (s *Service) readHead(ctx context.Context, org, ns, uri string) (*store.Head, error) {
	h, err := store.Read(ctx, s.pool, org, ns, uri)
	if err == store.ErrNoHead {
		return nil, nil
	}
	if err != nil {
		return nil, httperr.Store("reading the document's head", err)
	}
	return h, nil
}

// notFound is a source with no live head to act on.
func notFound(uri, why string) *httperr.Error {
	return (&httperr.Error{Status: http.StatusNotFound, Code: httperr.CodeNotFound, Message: fmt.Sprintf("%q %s", uri, why)}).
		With("source_uri", uri)
}
