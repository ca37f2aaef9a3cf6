package command

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/command/extraction"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/learnings"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
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
	return &extraction.Pipeline{Pool: s.pool, Models: s.models, Log: s.log, Config: s.cfg.Extraction, Registered: s.extractionSteps}
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
	var in *Inputs
	if !req.DryRun {
		if in, err = s.SealInputs(ctx, id, req.Messages); err != nil {
			return nil, err
		}
	}
	ans, err := pl.Run(ctx, extraction.Run{Principal: p, Namespace: r.namespace, Identity: id, Request: req,
		Writer: &factWriter{s: s, origin: r.origin, inputs: in}}, steps)
	if err != nil {
		return nil, err
	}
	if !ans.DryRun {
		ans.TurnIDs = s.KeepInputs(ctx, in, ans.Facts)
	}
	return &fromMessagesAnswer{ans}, nil
}

// Inputs is a transcript sealed for keeping in the conversation's record with the
// facts drawn from it, or turns the record already holds that a crystallization
// reads (observe.crystallize). The facts' commit writes the turns (or marks the held
// ones crystallized) and links the facts to them too (factWriter), so a crash between
// two commits can leave no fact without the turns it was drawn from; a run that
// commits nothing finishes after (KeepInputs).
type Inputs struct {
	turns *turnBatch
	// held are turns already kept (memory.observe's) that a crystallization reads.
	held []evidence.Turn
	// kept: the facts' commit kept the turns (or marked the held ones).
	kept bool
}

// rows are the inputs' turns in message order.
func (in *Inputs) rows() []evidence.Turn {
	if in.turns != nil {
		return in.turns.rows
	}
	return in.held
}

// write writes the inputs in tx with links to the facts: the new turns, or the held
// ones' crystallized mark.
func (s *Service) writeInputs(ctx context.Context, tx pgx.Tx, in *Inputs, facts func() []extraction.Fact) error {
	if in.turns != nil {
		return s.writeTurns(ctx, tx, in.turns, func(rows []evidence.Turn) []evidence.Link { return factLinks(rows, facts()) })
	}
	ids := make([]string, len(in.held))
	for i, t := range in.held {
		ids[i] = t.TurnID
	}
	if err := evidence.MarkCrystallized(ctx, tx, in.held[0].Org, in.held[0].Namespace, ids); err != nil {
		if errors.Is(err, evidence.ErrCrystallizedMeanwhile) {
			return httperr.New(http.StatusConflict, httperr.CodePreconditionFailed,
				"another crystallization of this session read some of its turns first: nothing was written; call again for the turns left")
		}
		return err
	}
	return evidence.InsertLinks(ctx, tx, factLinks(in.held, facts()))
}

// SealInputs seals a transcript for keeping (sealTurns): a transcript whose record
// would be too large for the broker is refused (413) before any model call. With
// LOOM_EXTRACTION_KEEP_INPUTS off it keeps nothing (nil: the facts are written alone).
func (s *Service) SealInputs(ctx context.Context, id memrow.Identity, msgs []extraction.Message) (*Inputs, error) {
	if !s.cfg.Extraction.KeepInputs {
		return nil, nil
	}
	turns := make([]observedTurn, len(msgs))
	for i, m := range msgs {
		turns[i] = observedTurn{Role: m.Role, Content: m.Content, Speaker: m.Speaker, At: m.At}
	}
	tb, err := s.sealTurns(ctx, id, turns, evidence.SourceExtraction)
	if err != nil {
		return nil, err
	}
	return &Inputs{turns: tb}, nil
}

// KeepInputs finishes keeping a transcript once its pipeline ran, and answers its
// turns' ids in message order. Turns the facts' commit kept are linked now to the
// memories a step before the write merged facts into (already stored, so they never
// lack evidence of their own writes). Turns no commit kept (the run wrote nothing) are
// kept now with their links. Either failure is logged, and the answer names no turns:
// what the run committed stands.
func (s *Service) KeepInputs(ctx context.Context, in *Inputs, facts []extraction.Fact) []string {
	if in == nil || len(in.rows()) == 0 {
		return nil
	}
	rows := in.rows()
	var err error
	switch {
	case in.kept:
		var merged []extraction.Fact
		for _, f := range facts {
			if f.DroppedBy != "" && f.MergedInto != "" {
				merged = append(merged, f)
			}
		}
		if links := factLinks(rows, merged); len(links) > 0 {
			err = pg.InTx(ctx, s.pool, func(tx pgx.Tx) error { return evidence.InsertLinks(ctx, tx, links) })
		}
	case in.turns != nil:
		err = s.commitTurns(ctx, in.turns, func(rows []evidence.Turn) []evidence.Link { return factLinks(rows, facts) })
	default:
		err = pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
			return s.writeInputs(ctx, tx, in, func() []extraction.Fact { return facts })
		})
	}
	if err != nil {
		s.log.Warn("memory.set_from_messages: the conversation's record is not complete: its turns, their crystallized mark or their links to merged memories are not kept",
			"org", rows[0].Org, "namespace", rows[0].Namespace, "turns_kept", in.kept, "err", err)
		if !in.kept && in.turns != nil {
			return nil
		}
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.TurnID
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
	// inputs, when set, is the transcript the facts are drawn from: their commit keeps
	// its turns and links each fact written or merged to its turn.
	inputs *Inputs
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
	filed, err := s.sealLearnings(fw)
	if err != nil {
		return nil, err
	}
	if len(fw.Entries) == 0 && len(fw.Retire) == 0 {
		return s.fileLearningsAlone(wctx, w, filed)
	}
	opts := bulkOptions{op: opFromMessages, retire: fw.Retire, inCommit: w.inCommit}
	if len(filed) > 0 {
		opts.inCommit = func(ctx context.Context, tx pgx.Tx) error {
			if w.inCommit != nil {
				if err := w.inCommit(ctx, tx); err != nil {
					return err
				}
			}
			return learnings.Insert(ctx, tx, filed)
		}
	}
	switch in := w.inputs; {
	case in == nil || fw.DryRun:
	case in.turns != nil && in.turns.fence == nil:
		// The transcript's turns go in the facts' own round trips.
		opts.turns = &factTurns{batch: in.turns, links: func(rows []evidence.Turn, written, merged []bulkResult) []evidence.Link {
			return factLinks(rows, writtenFacts(fw.MessageIndex, written, merged))
		}}
	default:
		opts.inWritten = func(ctx context.Context, tx pgx.Tx, written, merged []bulkResult) error {
			return s.writeInputs(ctx, tx, in, func() []extraction.Fact { return writtenFacts(fw.MessageIndex, written, merged) })
		}
	}
	b, err := s.runBulk(wctx, fw.Principal, bulkCall{origin: w.origin, namespace: fw.Namespace, body: bulkRequest{Entries: fw.Entries, DryRun: fw.DryRun}},
		opts)
	if err != nil {
		return nil, err
	}
	if w.inputs != nil && !fw.DryRun && b.committed() {
		w.inputs.kept = true
	}
	out := &extraction.Written{Outcomes: b.outcomes(s.now()), Superseded: b.ans.Superseded, DryRun: b.dryRun, Committed: b.committed()}
	if len(filed) > 0 && !b.committed() {
		// Nothing committed, so the commit that carries the learnings never ran.
		if err := s.commitLearnings(wctx, w, filed); err != nil {
			return nil, err
		}
	}
	out.LearningIDs, out.Committed = candidateIDs(filed), out.Committed || len(filed) > 0
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

// writtenFacts are a commit's written and merged entries as the facts factLinks links,
// each at the message its entry was drawn from.
func writtenFacts(msgs []int, written, merged []bulkResult) []extraction.Fact {
	var out []extraction.Fact
	for _, r := range written {
		if r.Index < len(msgs) {
			out = append(out, extraction.Fact{MessageIndex: msgs[r.Index], MemoryID: r.MemoryID, VersionText: r.VersionText})
		}
	}
	for _, r := range merged {
		if r.Index < len(msgs) {
			out = append(out, extraction.Fact{MessageIndex: msgs[r.Index], MergedInto: r.MergedInto})
		}
	}
	return out
}
