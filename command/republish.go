package command

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
)

// RepublishOptions says which records to re-create: every namespace's revisions from
// FromSeq on, narrowed to one org and/or one namespace, for Topic.
type RepublishOptions struct {
	Org       string // "" for every org
	Namespace string // "" for every namespace
	FromSeq   int64  // >= 1
	Topic     string
}

// RepublishResult counts what was queued for the relay.
type RepublishResult struct {
	Namespaces int
	Records    int
}

// Republish re-creates topic records from the Postgres journal (for a lost or
// truncated topic) by queueing them in the outbox for the relay. Each revision is
// sealed again under its own data key with its vector embedded again; one whose key
// was destroyed (redacted or erased) is sealed, empty, under a key nobody keeps, so it
// carries nothing. Consumers dedupe the copies by seq.
//
// A namespace's records go in with its generation locked (its writes wait a moment),
// after every outbox row of the namespace still waiting at or above FromSeq is taken
// out and put back among them in seq order: the relay publishes by outbox id, so the
// namespace's records reach the topic in seq order however the queue stood.
func (s *Service) Republish(ctx context.Context, opts RepublishOptions) (RepublishResult, error) {
	var res RepublishResult
	if opts.FromSeq < 1 {
		return res, fmt.Errorf("republish: from-seq %d, want >= 1", opts.FromSeq)
	}
	targets, err := s.republishTargets(ctx, opts)
	if err != nil {
		return res, err
	}
	for _, ns := range targets {
		n, err := s.republishNamespace(ctx, ns, opts)
		if err != nil {
			return res, err
		}
		res.Namespaces++
		res.Records += n
	}
	return res, nil
}

// nsGeneration is a namespace and its generation when listed.
type nsGeneration struct {
	org, namespace string
	generation     int64
}

func (s *Service) republishTargets(ctx context.Context, opts RepublishOptions) ([]nsGeneration, error) {
	gens, err := generations.List(ctx, s.pool, opts.Org, opts.Namespace, opts.FromSeq)
	if err != nil {
		return nil, fmt.Errorf("list namespaces to republish: %w", err)
	}
	out := make([]nsGeneration, len(gens))
	for i, g := range gens {
		out[i] = nsGeneration{org: g.Org, namespace: g.Namespace, generation: g.Generation}
	}
	return out, nil
}

// outboxEntry is one outbox row's record.
type outboxEntry struct {
	seq     int64
	topic   string
	key     []byte
	headers []byte
	value   []byte
	vectors []byte // a waiting row queued by reference (outbox.Record)
}

func (s *Service) republishNamespace(ctx context.Context, ns nsGeneration, opts RepublishOptions) (int, error) {
	// The slow part (embedding) runs before the lock, over the generation as listed.
	built, err := s.rebuild(ctx, s.pool, ns.org, ns.namespace, opts.FromSeq, ns.generation, opts.Topic)
	if err != nil {
		return 0, err
	}
	count := 0
	err = pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		gen, err := generations.Lock(ctx, tx, ns.org, ns.namespace)
		if err != nil {
			return fmt.Errorf("lock the generation of %s/%s: %w", ns.org, ns.namespace, err)
		}
		if gen > ns.generation {
			later, err := s.rebuild(ctx, tx, ns.org, ns.namespace, ns.generation+1, gen, opts.Topic)
			if err != nil {
				return err
			}
			built = append(built, later...)
		}
		// Waiting rows come out and go back in seq order; a parked copy of a seq that is
		// republished for its topic is replaced (the relay parks it again if Kafka still
		// refuses it).
		taken, err := outbox.TakeWaiting(ctx, tx, ns.org, ns.namespace, opts.FromSeq, opts.Topic)
		if err != nil {
			return err
		}
		var waiting []outboxEntry
		for _, e := range taken {
			waiting = append(waiting, outboxEntry{seq: e.Seq, topic: e.Topic, key: e.Key, headers: e.Headers, value: e.Value, vectors: e.Vectors})
		}
		queue := mergeBySeq(waiting, built, opts.Topic)
		b := &pgx.Batch{}
		for _, e := range queue {
			outbox.Queue(b, outbox.Record{Org: ns.org, Namespace: ns.namespace, Seq: e.seq, Topic: e.topic, Key: e.key, Headers: e.headers,
				Value: e.value, Vectors: e.vectors})
		}
		outbox.QueueNotify(b)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("queue the republished records of %s/%s: %w", ns.org, ns.namespace, err)
		}
		count = len(queue)
		return nil
	})
	return count, err
}

// mergeBySeq orders the waiting rows and the rebuilt records by seq, each waiting row
// before the rebuilt record of its seq, which it makes unnecessary when it is for the
// same topic (it is the original record).
func mergeBySeq(waiting, built []outboxEntry, topic string) []outboxEntry {
	covered := map[int64]bool{}
	for _, w := range waiting {
		if w.topic == topic {
			covered[w.seq] = true
		}
	}
	out := append([]outboxEntry(nil), waiting...)
	for _, b := range built {
		if !covered[b.seq] {
			out = append(out, b)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// queryer is a pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// journalRevision is one memory_revisions row with what rebuilding its record needs.
type journalRevision struct {
	row         memrow.Row
	event       events.Type
	op          string
	verdict     string
	requestID   string
	prevVersion int64
	dataKey     []byte // nil when destroyed
	note        *events.AuditNote
}

// rebuild re-creates the records of seqs from..to of a namespace from the journal.
func (s *Service) rebuild(ctx context.Context, q queryer, org, namespace string, from, to int64, topic string) ([]outboxEntry, error) {
	if from > to {
		return nil, nil
	}
	rows, err := q.Query(ctx, journalSQL, org, namespace, from, to)
	if err != nil {
		return nil, fmt.Errorf("read the journal of %s/%s: %w", org, namespace, err)
	}
	var revs []journalRevision
	for rows.Next() {
		var j journalRevision
		var raw []byte
		var event string
		if err := rows.Scan(&raw, &event, &j.op, &j.verdict, &j.requestID, &j.note, &j.dataKey, &j.prevVersion); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the journal of %s/%s: %w", org, namespace, err)
		}
		if err := json.Unmarshal(raw, &j.row); err != nil {
			rows.Close()
			return nil, fmt.Errorf("decode journal row of %s/%s: %w", org, namespace, err)
		}
		j.event = events.Type(event)
		revs = append(revs, j)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the journal of %s/%s: %w", org, namespace, err)
	}
	// The generations that carry no revision (an erasure's, a redaction's) are kept
	// as they were queued.
	others, err := generationRecords(ctx, q, org, namespace, from, to, topic)
	if err != nil {
		return nil, err
	}
	if int64(len(revs)+len(others)) != to-from+1 {
		// An erasure removes its scope's revisions: their seqs are withdrawn, and the
		// erasure's own record, which follows them, lets every consumer step over them.
		s.log.Info("republish: seqs of the range have no record (withdrawn by an erasure)", "namespace", org+"/"+namespace,
			"from", from, "to", to, "records", len(revs)+len(others))
	}
	embedded, err := s.embedJournal(ctx, revs)
	if err != nil {
		return nil, err
	}
	refKey, err := s.userRefs.Current(ctx, org)
	if err != nil {
		return nil, err
	}
	out := make([]outboxEntry, 0, len(revs))
	for i, j := range revs {
		key := j.dataKey
		rec := revisionRecord{row: &j.row, op: j.op, verdict: j.verdict, event: j.event, prevVersion: j.prevVersion, requestID: j.requestID,
			userRefKey: refKey.Key, refGen: refKey.Gen, audit: j.note}
		if w := embedded[i]; w != nil {
			rec.vector, rec.keyVector, rec.chunkVectors = w.vector, w.keyVector, w.chunkVectors
		}
		if key == nil {
			// A key destroyed with its content: seal nothing under a key nobody keeps.
			if key, err = events.NewDataKey(); err != nil {
				return nil, err
			}
			empty := j.row
			empty.MemoryKey, empty.Value, empty.Tags, empty.Entities = "", nil, nil, nil
			rec.row, rec.vector, rec.keyVector, rec.chunkVectors = &empty, nil, nil, nil
		}
		value, headers, err := encodeRecord(rec, key, s.cfg.EventSource)
		if err != nil {
			return nil, fmt.Errorf("rebuild the record of %s: %w", events.RecordID(org, namespace, j.row.Seq), err)
		}
		out = append(out, outboxEntry{seq: j.row.Seq, topic: topic, key: events.RecordKey(org, namespace), headers: headers, value: value})
	}
	out = append(out, others...)
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out, nil
}

// embedJournal embeds again, as the write did (the value, the key's words, a long
// value's windows), every revision that was embedded, a few at a time.
func (s *Service) embedJournal(ctx context.Context, revs []journalRevision) ([]*setWrite, error) {
	const batch = 64
	out := make([]*setWrite, len(revs))
	var pending []*setWrite
	flush := func() error {
		if err := s.embedWrites(ctx, pending); err != nil {
			return fmt.Errorf("embed journal revisions: %w", err)
		}
		pending = pending[:0]
		return nil
	}
	for i, j := range revs {
		if j.dataKey == nil || j.row.EmbeddingDim == 0 || j.row.Tombstone {
			continue
		}
		w := &setWrite{id: j.row.Identity}
		w.setValue(j.row.Value)
		out[i] = w
		pending = append(pending, w)
		if len(pending) == batch {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}
