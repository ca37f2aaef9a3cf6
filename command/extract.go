package command

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/command/extraction"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// memory.set_from_messages (POST /v1/namespaces/{ns}/memories:fromMessages) extracts
// the durable facts of a conversation with a model and writes them through
// memory.bulk_set's path, so every fact is judged as any write is. It runs the
// pipeline (command/extraction) inline, or, deferred, commits the request and answers
// its queue_id at once (extract_queue.go); an extraction worker (workers/) runs it
// later. The pipeline writes through factWriter.

const opFromMessages = extraction.Op

// fromMessagesAnswer is memory.set_from_messages' answer, as a write answers.
type fromMessagesAnswer struct{ *extraction.Answer }

func (a fromMessagesAnswer) committed() bool { return a.Committed() }
func (a fromMessagesAnswer) outcome() string { return a.Outcome() }

// fromMessagesCall is a memory.set_from_messages of the route's namespace.
type fromMessagesCall struct {
	origin
	namespace string
	body      *extraction.Request
}

// extraction is the pipeline, over this write side's stores and models.
func (s *Service) extraction() *extraction.Pipeline {
	return &extraction.Pipeline{Pool: s.pool, Models: s.models, Log: s.log, Config: s.cfg.Extraction}
}

// fromMessages is memory.set_from_messages.
func (s *Service) fromMessages(ctx context.Context, p auth.Principal, r fromMessagesCall) (*fromMessagesAnswer, error) {
	req := r.body
	id, other, err := route.WriteIdentity(p, r.namespace, "", req.Names())
	if err != nil {
		return nil, err
	}
	if other {
		return nil, otherUser()
	}
	pl := s.extraction()
	steps, err := pl.Check(req, id)
	if err != nil {
		return nil, err
	}
	bill := llm.Bill{Org: p.Org, Namespace: r.namespace, Purpose: llm.PurposeExtraction}
	deferred := req.Defer != nil && *req.Defer
	if req.Defer == nil && !req.DryRun {
		deferred = s.cfg.Extraction.Defers(id.Agent)
	}
	// A deferred request of an org whose model calls are held is queued all the same:
	// it waits, held, until they are released.
	if err := s.checkModels(ctx, bill); err != nil && !(deferred && llm.IsHeld(err)) {
		return nil, err
	}
	if deferred {
		return s.enqueue(ctx, p, r.namespace, id, req)
	}
	ans, err := pl.Run(ctx, extraction.Run{Principal: p, Namespace: r.namespace, Identity: id, Request: req,
		Writer: &factWriter{s: s, origin: r.origin}}, steps)
	if err != nil {
		return nil, err
	}
	if !ans.DryRun {
		ans.TurnIDs = s.keepInputs(ctx, id, req.Messages, ans.Facts)
	}
	return &fromMessagesAnswer{ans}, nil
}

// keepInputs keeps a transcript the pipeline ran over as evidence, with the facts it
// wrote linked to the turns they were drawn from, in one commit (keepTurns) after the
// facts': a request that failed keeps nothing, so its retry keeps its turns once. The
// facts are committed and answered whatever becomes of their evidence: a failure to
// keep it is logged, and the answer names no turns.
func (s *Service) keepInputs(ctx context.Context, id memrow.Identity, msgs []extraction.Message, facts []extraction.Fact) []string {
	turns := make([]observedTurn, len(msgs))
	for i, m := range msgs {
		turns[i] = observedTurn{Role: m.Role, Content: m.Content, Speaker: m.Speaker, At: m.At}
	}
	kept, _, err := s.keepTurns(ctx, id, turns, evidence.SourceExtraction, func(rows []evidence.Turn) []evidence.Link {
		return factLinks(rows, facts)
	})
	if err != nil {
		s.log.Warn("memory.set_from_messages: the facts are written; their transcript is not kept as evidence",
			"org", id.Org, "namespace", id.Namespace, "err", err)
		return nil
	}
	ids := make([]string, len(kept))
	for i, k := range kept {
		ids[i] = k.TurnID
	}
	return ids
}

// factLinks links each fact the write kept (a version written, or a memory it merged
// into) to the turn it was drawn from.
func factLinks(rows []evidence.Turn, facts []extraction.Fact) []evidence.Link {
	var out []evidence.Link
	for _, f := range facts {
		if f.MessageIndex < 0 || f.MessageIndex >= len(rows) {
			continue
		}
		t := rows[f.MessageIndex]
		memoryID, version := f.MemoryID, int64(0)
		if f.MergedInto != "" {
			memoryID = f.MergedInto
		} else if v, err := strconv.ParseInt(f.VersionText, 10, 64); err == nil {
			version = v
		}
		if memoryID == "" || f.DroppedBy != "" && f.MergedInto == "" {
			continue
		}
		out = append(out, evidence.Link{Org: t.Org, Namespace: t.Namespace, MemoryID: memoryID, Version: version,
			TurnID: t.TurnID, UserID: t.UserID, Seq: t.Seq})
	}
	return out
}

// checkModels refuses a request no model call can be made for: no provider, or a
// namespace that spent its daily cap.
func (s *Service) checkModels(ctx context.Context, bill llm.Bill) error {
	if s.models == nil {
		return llm.NotConfigured(bill.Purpose)
	}
	return s.models.Check(ctx, bill)
}

// validIdentity checks the agent, user and session of a write that names its keys
// itself.
func validIdentity(id memrow.Identity) error {
	id.MemoryKey = "k"
	return id.Validate()
}

// factWriter is the pipeline's writer: the write side's peer read and memory.bulk_set's
// path, under the request's origin.
type factWriter struct {
	s      *Service
	origin origin
	// inCommit runs in the facts' commit: a deferred request's done mark.
	inCommit func(ctx context.Context, tx pgx.Tx) error
}

// Nearest reads the stored facts nearest a transcript's text (the peers a write of it
// would have, of the subject's own rows).
func (w *factWriter) Nearest(ctx context.Context, id memrow.Identity, memoryType, readUserID, text string) ([]*memrow.Row, error) {
	s := w.s
	vs, err := s.embedder.Embed(ctx, []string{text})
	if err != nil {
		return nil, embedError("embedding the transcript", err)
	}
	q := peerQuery{id: id, memoryType: memoryType, vector: vs[0], readUserID: readUserID}
	peers, err := s.readPeers(ctx, q, s.indexed(id.Org, id.Namespace))
	if errors.Is(err, errPeersMoved) {
		// The index dropped the namespace since it was asked; no gap check hangs on it.
		peers, err = s.readPeers(ctx, q, false)
	}
	if err != nil {
		return nil, peerReadError("reading the nearest memories", err)
	}
	rows := make([]*memrow.Row, len(peers))
	for i, p := range peers {
		rows[i] = p.row
	}
	return rows, nil
}

// Write writes the facts through memory.bulk_set's path, within the write deadline,
// and in the same commit retires the rows the transcript asked to forget.
func (w *factWriter) Write(ctx context.Context, fw extraction.Write) (*extraction.Written, error) {
	s := w.s
	wctx, cancel := context.WithTimeout(ctx, s.cfg.WriteDeadline)
	defer cancel()
	b, err := s.runBulk(wctx, fw.Principal, bulkCall{origin: w.origin, namespace: fw.Namespace, body: bulkRequest{Entries: fw.Entries, DryRun: fw.DryRun}},
		bulkOptions{op: opFromMessages, retire: fw.Retire, inCommit: w.inCommit})
	if err != nil {
		return nil, err
	}
	out := &extraction.Written{Outcomes: b.outcomes(s.now()), Superseded: b.ans.Superseded, DryRun: b.dryRun, Committed: b.committed()}
	for _, r := range b.retired {
		out.Retired = append(out.Retired, extraction.Retired{Identity: r.id, MemoryID: r.memoryID, Retired: r.retired, Skipped: r.skipped})
	}
	return out, nil
}

// outcomes is what the batch made of each entry, by index, as its last round left it.
func (b *bulkWrite) outcomes(now time.Time) map[int]extraction.Fact {
	out := map[int]extraction.Fact{}
	byIndex := map[int]*entry{}
	for _, e := range b.entries {
		byIndex[e.index] = e
	}
	for _, w := range b.ans.Written {
		e := byIndex[w.Index]
		f := extraction.Fact{Verdict: string(w.Verdict), MemoryID: w.MemoryID, VersionText: w.VersionText, Status: w.Status,
			Revised: e.head != nil && e.head.Live(now) && e.head.ContentSHA256 != e.row.ContentSHA256}
		if e.row != nil {
			f.DuplicateOf, f.ConflictWith = e.row.DuplicateOf, e.row.ConflictWith
		}
		out[w.Index] = f
	}
	for _, m := range b.ans.Merged {
		out[m.Index] = extraction.Fact{Verdict: string(VerdictMerge), MergedInto: m.MergedInto}
	}
	for verdict, list := range map[string][]int{"skipped_pinned": b.ans.SkippedPinned, "skipped_locked": b.ans.SkippedLocked,
		"skipped_unchanged": b.ans.SkippedUnchanged, "blacklisted": b.ans.Blacklisted} {
		for _, i := range list {
			out[i] = extraction.Fact{Verdict: verdict}
		}
	}
	return out
}

func (b *bulkWrite) committed() bool {
	if b.dryRun {
		return false
	}
	if len(b.ans.Written) > 0 {
		return true
	}
	for _, r := range b.retired {
		if r.retired {
			return true
		}
	}
	return false
}
