package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/command/extraction"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/communities"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/extractqueue"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/reflections"
)

// The write API of the workers role (workers/): the conflict resolver, the entity
// extractor and the extraction workers write through the write side's commit and read
// what a write reads, and nothing else of it. Each is a thin wrapper over the write
// path's own method, so the workers see the write side as a write sees it; the write
// side knows nothing of the workers but the floor at which its admission marks a write
// for the resolver.

// WithJudgementFloor gives the write side the cosine at which a write's peer marks it
// judgement_owed for the conflict resolver (0: the resolver is off, nothing is marked).
func WithJudgementFloor(floor float64) Option { return func(s *Service) { s.judgement = floor } }

// judgementFloor is the cosine at which a write's peer marks it for the resolver; 0
// while the resolver is off.
func (s *Service) judgementFloor() float64 { return s.judgement }

// ErrHeadMoved: a head a worker's plan builds over moved since it was read; read it
// again.
var ErrHeadMoved = errHeadMoved

// OpUnsupersede is the op of an Undo of a resolver's retirement.
const OpUnsupersede = opUnsupersede

// WorkerRow is one row of a worker's commit: a new revision of the head it read.
type WorkerRow struct {
	Op    string
	Event events.Type
	Row   *memrow.Row
	// ReadVersion and ReadSeq are the head's the row was built over: the commit
	// refuses (ErrHeadMoved) when it moved since.
	ReadVersion, ReadSeq int64
	// Amends marks derived metadata of the head it read (pending.amends): the
	// revision keeps the head's version; PrevVersion is the version before it.
	Amends      bool
	PrevVersion int64
	// Vector, KeyVector and ChunkVectors are the row's search vectors, sealed with its
	// content (EmbedWorkerRow sets them); none: the row's vectors stay as they were.
	Vector, KeyVector []float32
	ChunkVectors      [][]float32
}

// WorkerPlan is one commit of a worker's rows, in one namespace. InTx runs in the
// transaction once the heads are locked and checked, before anything is written; its
// error rolls the commit back.
type WorkerPlan struct {
	Org, Namespace string
	RequestID      string
	Rows           []WorkerRow
	InTx           func(ctx context.Context, tx pgx.Tx) error
	// Note, when set, is the worker's own audit row of the commit (the conflict
	// resolver's decision): the commit's last record carries it with the rows' seqs
	// and memory ids.
	Note *events.AuditNote
}

// CommitWorkerPlan commits a worker's rows through the one commit, whatever the
// namespace's policy generation (a worker's write is no admission).
func (s *Service) CommitWorkerPlan(ctx context.Context, p WorkerPlan) error {
	rows := make([]*pending, len(p.Rows))
	for i, r := range p.Rows {
		rows[i] = &pending{op: r.Op, event: r.Event, row: r.Row, readVersion: r.ReadVersion, readSeq: r.ReadSeq,
			amends: r.Amends, prevVersion: r.PrevVersion, vector: r.Vector, keyVector: r.KeyVector, chunkVectors: r.ChunkVectors}
	}
	return s.commit(ctx, &commitPlan{org: p.Org, namespace: p.Namespace, rows: rows, requestID: p.RequestID,
		policyGeneration: -1, inTx: p.InTx, note: p.Note})
}

// Policy is what a worker reads of a namespace's policy.
type Policy struct {
	// Conflict is the namespace's conflict_policy.
	Conflict string
	// Cardinality is a relation predicate's declared cardinality.
	Cardinality func(predicate string) string
	// Allowlisted reports whether two memories are a pair of the namespace's conflict
	// allowlist (conflict_allowlist.go), which the resolver never judges.
	Allowlisted func(a, b string) bool
}

// NamespacePolicy reads a namespace's policy as a write reads it.
func (s *Service) NamespacePolicy(ctx context.Context, org, ns string) (Policy, error) {
	pol, err := s.loadPolicy(ctx, s.pool, org, ns)
	if err != nil {
		return Policy{}, err
	}
	return Policy{Conflict: pol.config.ConflictPolicy, Cardinality: pol.config.cardinality, Allowlisted: pol.allowlisted}, nil
}

// Peer is a stored row near another, with its cosine.
type Peer struct {
	Row    *memrow.Row
	Cosine float64
}

// NearestPeers reads the rows of other keys nearest a row's value vector, as a
// write's peer read does, from ClickHouse's search documents (a worker captured no
// index position), checked against their Postgres heads.
func (s *Service) NearestPeers(ctx context.Context, id memrow.Identity, memoryType, readUserID string, vector []float32) ([]Peer, error) {
	ps, err := s.readPeers(ctx, peerQuery{id: id, memoryType: memoryType, vector: vector, readUserID: readUserID}, false)
	if err != nil {
		return nil, err
	}
	out := make([]Peer, len(ps))
	for i, p := range ps {
		out[i] = Peer{Row: p.row, Cosine: p.cosine}
	}
	return out, nil
}

// VectorOf is this process's copy of a committed row's value vector, or nil.
func (s *Service) VectorOf(r *memrow.Row) []float32 { return s.vectorOf(r) }

// UndoneBetween reports, for each of peers, whether an Undo (memory.unsupersede) left
// its pair with row alone.
func (s *Service) UndoneBetween(ctx context.Context, row *memrow.Row, peers []*memrow.Row) (map[string]bool, error) {
	return s.undoneBetween(ctx, row, peers)
}

// AmendedRevision reads, from the journal, what the amendment of a key's version
// repeats of its revision: the version before it and its event type.
func AmendedRevision(ctx context.Context, q heads.Querier, id memrow.Identity, version int64) (int64, events.Type, error) {
	prev, event, err := amendedRevision(ctx, q, id, version)
	return prev, events.Type(event), err
}

// BatchSender is a pool, a connection or a transaction: what sends a pipelined batch.
type BatchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// AmendedRevisions is AmendedRevision for many heads (each at its own version) in
// one round trip.
func AmendedRevisions(ctx context.Context, q BatchSender, hs []*memrow.Row) ([]int64, []events.Type, error) {
	prevs, evs, err := amendedRevisions(ctx, q, hs)
	if err != nil {
		return nil, nil, err
	}
	out := make([]events.Type, len(evs))
	for i, e := range evs {
		out[i] = events.Type(e)
	}
	return prevs, out, nil
}

// JournalStep is one revision of a memory as the conflict resolver reads it.
type JournalStep struct {
	Version       int64
	ContentSHA256 string
	Status, Op    string
}

// MemoryJournal reads the newest 256 revisions of a row's memory, newest first.
func MemoryJournal(ctx context.Context, q heads.Querier, r *memrow.Row) ([]JournalStep, error) {
	return memoryJournal(ctx, q, r)
}

// ErasureRunning reports whether an erasure of the org is running (in a commit's
// transaction, q is it: the erasure is recorded under the org's policy lock).
func ErasureRunning(ctx context.Context, q heads.Querier, org string) (bool, error) {
	return erasureRunning(ctx, q, org)
}

// CopyOf is a new version of a head with its content unchanged: a copy writer's row.
func CopyOf(h *memrow.Row) *memrow.Row { return copyOf(h) }

// Unchanged reports whether a copy states nothing its head does not.
func Unchanged(head, row *memrow.Row) bool { return unchanged(head, row) }

// AppendOnce appends v to list unless it holds it.
func AppendOnce(list []string, v string) []string { return appendOnce(list, v) }

// SameSubject reports whether two rows are of one subject (a row's peers are its
// subject's).
func SameSubject(a, b *memrow.Row) bool { return sameSubject(a, b) }

// Anonymous reports whether a user_id is the anonymous user's.
func Anonymous(userID string) bool { return anonymous(userID) }

// Round4 is a cosine as answers show it.
func Round4(f float64) float64 { return round4(f) }

// RequestRecords makes the extraction topic records of queued requests under ctx
// (extract_queue.go): a record names its user by reference, which may read the org's key.
func (s *Service) RequestRecords(ctx context.Context) func(extractqueue.Queued) (outbox.Record, error) {
	return func(q extractqueue.Queued) (outbox.Record, error) { return s.requestRecord(ctx, q) }
}

// FactWriter is the writer of a deferred memory.set_from_messages' facts (the
// extraction workers run its pipeline, command/extraction): the write side's peer read
// and memory.bulk_set's path, under the request's id ("extraction:" and its queue
// id). inCommit runs in the transaction that commits the facts (the request's done
// mark); its error rolls them back. in (SealInputs), when set, is the transcript: the
// same commit keeps its turns, linked to the facts (KeepInputs finishes it).
func (s *Service) FactWriter(queueID string, in *Inputs, inCommit func(ctx context.Context, tx pgx.Tx) error) extraction.Writer {
	return &factWriter{s: s, origin: origin{requestID: "extraction:" + queueID}, inCommit: inCommit, inputs: in}
}

// EmbedWorkerRow embeds a worker row's value as a write embeds it (the value, the
// key's words, a long value's windows) and sets its vectors and its row's embedder; an
// unavailable embedder is embed.ErrEmbedderUnavailable (through the error's chain).
func (s *Service) EmbedWorkerRow(ctx context.Context, r *WorkerRow) error {
	p := &pending{row: r.Row}
	if err := s.embedRows(ctx, []*pending{p}); err != nil {
		return err
	}
	r.Vector, r.KeyVector, r.ChunkVectors = p.vector, p.keyVector, p.chunkVectors
	return nil
}

// KeepSessionDigest writes a session digest the session_digest pass made (text is
// its digest of d's session up to d.WindowEnd): sealed under a fresh data key kept
// wrapped on its row alone, superseding the session's digests before it. False: the
// last turn it read is gone (an erasure or a redaction took it), and nothing is kept.
func (s *Service) KeepSessionDigest(ctx context.Context, d evidence.Digest, text string) (bool, error) {
	if err := s.sealDigest(&d, text); err != nil {
		return false, err
	}
	return evidence.InsertDigest(ctx, s.pool, d)
}

// sealDigest seals a digest's text under a fresh data key, kept wrapped on its row.
func (s *Service) sealDigest(d *evidence.Digest, text string) error {
	key, err := events.NewDataKey()
	if err != nil {
		return err
	}
	if d.DataKey, err = s.storedKey(key); err != nil {
		return err
	}
	d.Sealed, err = evidence.SealDigest(key, d.SessionID, text)
	return err
}

// SensitivityRelabel is the sensitivity sweep's copy of a head written by a path that
// skips detection (workers/sensitivity_sweep.go): when the write path's detector finds
// secret or personal data in its value or key, a copy labelled high that keeps only the
// sensitive retention (LOOM_MEMORY_SENSITIVE_RETENTION_DAYS), as memory.set would have
// labelled it, and the kinds found; nil when it finds nothing or the head is high.
func (s *Service) SensitivityRelabel(h *memrow.Row, now time.Time) (*memrow.Row, []string) {
	if h.Sensitivity == memrow.SensitivityHigh || len(h.Value) == 0 {
		return nil, nil
	}
	kinds := detectSensitive(memrow.ValueText(h.Value) + " " + h.MemoryKey)
	if len(kinds) == 0 {
		return nil, nil
	}
	row := copyOf(h)
	row.Sensitivity = memrow.SensitivityHigh
	if s.cfg.SensitiveRetention > 0 {
		if at := now.Add(s.cfg.SensitiveRetention).UTC(); row.ExpiresAt == nil || at.Before(*row.ExpiresAt) {
			row.ExpiresAt = &at
			if row.OnExpire == "" {
				row.OnExpire = ExpireTombstone
			}
		}
	}
	return row, kinds
}

// KeepEntityCommunities replaces a namespace's entity communities with labels (entity
// → community) the entity_communities pass found (internal/communities), unless an
// erasure of the org runs (then it keeps nothing and reports false: the pass asks
// again later).
func (s *Service) KeepEntityCommunities(ctx context.Context, org, ns string, labels map[string]string, at time.Time) (bool, error) {
	kept := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		running, err := erasureRunning(ctx, tx, org)
		if err != nil || running {
			return err
		}
		kept = true
		return communities.Replace(ctx, tx, org, ns, labels, at)
	})
	if err != nil {
		return false, err
	}
	return kept, nil
}

// ErrOutcomeNotKept: a session's outcome label was not kept (the last turn it read is
// gone, an erasure of the org runs, or the namespace no longer opts in), and nothing of
// its commit was.
var ErrOutcomeNotKept = errors.New("the session's outcome was not kept")

// KeepReflection keeps the reflection_distill pass's outcome label of a session
// (internal/reflections) and, when row is not nil, its reflection row, in one commit:
// both or neither.
func (s *Service) KeepReflection(ctx context.Context, o reflections.Outcome, row *WorkerRow, requestID string) error {
	keep := func(ctx context.Context, tx pgx.Tx) error {
		running, err := ErasureRunning(ctx, tx, o.Org)
		if err != nil {
			return fmt.Errorf("read the org's erasures: %w", err)
		}
		if running {
			return ErrOutcomeNotKept
		}
		kept, err := reflections.KeepOutcome(ctx, tx, o)
		if err != nil {
			return err
		}
		if !kept {
			return ErrOutcomeNotKept
		}
		return nil
	}
	if row == nil {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return keep(ctx, tx) })
	}
	return s.CommitWorkerPlan(ctx, WorkerPlan{Org: o.Org, Namespace: o.Namespace, RequestID: requestID, Rows: []WorkerRow{*row}, InTx: keep})
}
