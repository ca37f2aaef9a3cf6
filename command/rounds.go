package command

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/internal/text"
)

// A write of memory.set, memory.update, memory.update_by_id or memory.bulk_set is
// admitted in rounds: each reads the policy and the heads as they are now, decides
// (admit.go), and commits. A gap whose rows may be peers, a head that moved or a
// policy that moved sends the write to another round, up to LOOM_PG_ADMISSION_ROUNDS
// rounds within LOOM_PG_ADMISSION_DEADLINE_MS; then it answers 503
// ADMISSION_CONTENDED (schemas/openapi.yaml, memory.set, "Admission").

// admitRounds runs round until one answers (done or an error). round gets the seq its
// gap check starts after (-1 at first: its own capture) and returns the next one. The
// deadline counts the re-checks, from the end of the first round: a first round slowed
// by its stores (a peer read while ClickHouse recovers) is not contention, and its
// write gets its re-checks like any other.
func (s *Service) admitRounds(round func(gapFrom int64) (done bool, next int64, err error)) error {
	var deadline time.Time
	gapFrom := int64(-1)
	for r := 0; r < s.cfg.AdmissionRounds; r++ {
		switch {
		case r == 1:
			deadline = s.now().Add(s.cfg.AdmissionDeadline)
		case r > 1 && s.now().After(deadline):
			return contended(errHeadMoved)
		}
		done, next, err := round(gapFrom)
		if err != nil || done {
			return err
		}
		gapFrom = next
	}
	return contended(errHeadMoved)
}

// roundState is what a round reads of Postgres in one round trip: the namespace's
// policy, the heads of the round's keys under every identity, the heads that hold one
// of its exact values, and the capture its peer reads are covered by.
type roundState struct {
	policy   *policy
	keyHeads map[string][]*memrow.Row // by memory_key
	bySHA    map[string][]*memrow.Row // by content_sha256
	// capture: every revision at or below it is in what the round's peer reads see. It
	// is the process's index position when the index holds the namespace (fromIndex),
	// else the serving projection's watermark (every revision at or below it is in
	// ClickHouse).
	capture   int64
	fromIndex bool
	// policyCached: the policy is the one this process read last (policyCache), not
	// read in this round.
	policyCached bool
}

// readRound reads a round's state. cachedPolicy lets it take the namespace's policy
// from the process's cache (policyCache) instead of reading it.
func (s *Service) readRound(ctx context.Context, org, ns string, keys, shas []string, cachedPolicy bool) (*roundState, error) {
	st := &roundState{keyHeads: map[string][]*memrow.Row{}, bySHA: map[string][]*memrow.Row{}}
	// Read before the peer reads: the position only moves up, so it covers them.
	if st.fromIndex = s.indexed(org, ns); st.fromIndex {
		st.capture = s.index.Position(searchindex.Space{Org: org, Namespace: ns})
	}
	b := &pgx.Batch{}
	var finish func() (*policy, error)
	if cachedPolicy {
		st.policy, st.policyCached = s.policies.get(org, ns)
	}
	if !st.policyCached {
		finish = queuePolicy(b, org, ns)
	}
	var byKey, bySHA []*memrow.Row
	queueHeads(b, &byKey, heads.WithKeysSQL, org, ns, keys)
	if len(shas) > 0 {
		queueHeads(b, &bySHA, heads.WithContentSQL, org, ns, shas)
	}
	if !st.fromIndex {
		s.queueWatermark(b, org, ns, &st.capture)
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if finish != nil {
		var err error
		if st.policy, err = finish(); err != nil {
			return nil, err
		}
		s.policies.put(org, ns, st.policy)
	}
	for _, h := range byKey {
		st.keyHeads[h.MemoryKey] = append(st.keyHeads[h.MemoryKey], h)
	}
	for _, h := range bySHA {
		st.bySHA[h.ContentSHA256] = append(st.bySHA[h.ContentSHA256], h)
	}
	return st, nil
}

// commitRound commits a round's plan (a dry run only checks its gap) and classifies
// what came back. A gap that may hold peers goes to absorb, which measures it for the
// next round; a moved head or policy needs no more than a new read. retry reports
// either, with the seq the next round's gap check starts after. judging names what a
// gap too large to check stopped the commit from judging.
func (s *Service) commitRound(ctx context.Context, plan *commitPlan, dryRun bool, judging string, absorb func(*errGap) error) (retry bool, next int64, err error) {
	if dryRun {
		err = s.dryGap(ctx, plan)
	} else {
		s.faults.beforeCommit()
		err = s.commit(ctx, plan)
	}
	var gap *errGap
	switch {
	case errors.As(err, &gap):
		s.commits.With("gap").Inc()
		if err := absorb(gap); err != nil {
			return false, 0, err
		}
		return true, gap.upTo, nil
	case errors.Is(err, errHeadMoved):
		s.commits.With("head_moved").Inc()
		return true, plan.gapFrom, nil
	case errors.Is(err, errPolicyMoved):
		s.commits.With("policy_moved").Inc()
		s.policies.drop(plan.org, plan.namespace)
		return true, plan.gapFrom, nil
	case errors.Is(err, errGapTooLarge):
		return false, 0, httperr.Unavailable(httperr.CodeProjectionBehind,
			"the search index (or ClickHouse) is too far behind the namespace to judge "+judging+"; retry", err)
	case err != nil:
		return false, 0, commitError(err)
	}
	if !dryRun {
		s.commits.With("committed").Inc()
		if err := s.faults.afterCommit(); err != nil {
			return false, 0, err
		}
	}
	return false, 0, nil
}

// embedEntries embeds, in one call, the value, the key's words and a long value's
// chunks of every embedded entry that has no vector yet (a later round reuses them),
// and stamps each embedded row with the model. Only an embedded row has a search
// document.
func (s *Service) embedEntries(ctx context.Context, entries []*entry, doing string) error {
	var ws []*setWrite
	for _, e := range entries {
		if e.row.Embedded() && e.w.vector == nil {
			ws = append(ws, e.w)
		}
	}
	if err := s.embedWrites(ctx, ws); err != nil {
		return embedError(doing, err)
	}
	for _, e := range entries {
		if e.row.Embedded() {
			e.row.EmbeddingModel, e.row.EmbeddingDim = s.embedder.Model(), len(e.w.vector)
		}
	}
	s.remember(entries)
	return nil
}

// embedRows builds, in one call, the search documents of the rows that have one (live,
// embedded, not redacted), for a writer that copies rows it did not admit (a restore,
// a rollback), and stamps each such row with the model.
func (s *Service) embedRows(ctx context.Context, ps []*pending) error {
	var ws []*setWrite
	var embedded []*pending
	for _, p := range ps {
		r := p.row
		if r.Tombstone || r.Redacted || !r.Embedded() {
			continue
		}
		w := &setWrite{id: r.Identity}
		w.setValue(r.Value)
		ws, embedded = append(ws, w), append(embedded, p)
	}
	if err := s.embedWrites(ctx, ws); err != nil {
		return embedError("embedding the values", err)
	}
	for i, p := range embedded {
		p.vector, p.keyVector, p.chunkVectors = ws[i].vector, ws[i].keyVector, ws[i].chunkVectors
		p.row.EmbeddingModel, p.row.EmbeddingDim = s.embedder.Model(), len(ws[i].vector)
	}
	return nil
}

// embedWrites embeds the writes' texts in one call and hands each its vectors.
func (s *Service) embedWrites(ctx context.Context, ws []*setWrite) error {
	var texts []string
	var splits []func([][]float32)
	var sizes []int
	for _, w := range ws {
		ts, split := embedTexts(w)
		texts = append(texts, ts...)
		splits, sizes = append(splits, split), append(sizes, len(ts))
	}
	if len(texts) == 0 {
		return nil
	}
	vs, err := s.embedder.Embed(ctx, texts)
	if err != nil {
		return err
	}
	for i, split := range splits {
		split(vs[:sizes[i]])
		vs = vs[sizes[i]:]
	}
	return nil
}

// embedError answers an embedder that failed while doing what: unavailable, it is a
// retryable 503.
func embedError(doing string, err error) error {
	if errors.Is(err, embed.ErrEmbedderUnavailable) {
		return httperr.Unavailable(httperr.CodeEmbedderDown, "the embedder is unavailable; retry", err)
	}
	return httperr.Store(doing, err)
}

// embedTexts lists a write's texts to embed and returns the function that hands the
// vectors back to it.
func embedTexts(w *setWrite) ([]string, func([][]float32)) {
	texts := []string{w.valueText}
	keyWords := memrow.KeyWords(w.id.MemoryKey)
	if keyWords != "" {
		texts = append(texts, keyWords)
	}
	chunks := text.Chunks(w.valueText)
	texts = append(texts, chunks...)
	return texts, func(vs [][]float32) {
		w.vector, vs = vs[0], vs[1:]
		if keyWords != "" {
			w.keyVector, vs = vs[0], vs[1:]
		}
		w.chunkVectors = vs[:len(chunks)]
	}
}

// gapVectors gives each gap row its vector: this process's copy of one it committed,
// else, for a row want keeps, its text embedded again (in one call).
func (s *Service) gapVectors(ctx context.Context, rows []*memrow.Row, want func(*memrow.Row) bool) ([]peer, error) {
	out := make([]peer, len(rows))
	var texts []string
	var missing []int
	for i, r := range rows {
		out[i] = peer{row: r, vector: s.vectorOf(r)}
		if out[i].vector == nil && want(r) {
			texts, missing = append(texts, memrow.ValueText(r.Value)), append(missing, i)
		}
	}
	if len(texts) > 0 {
		vs, err := s.embedder.Embed(ctx, texts)
		if err != nil {
			return nil, embedError("measuring the admission gap", err)
		}
		for k, i := range missing {
			out[i].vector = vs[k]
		}
	}
	return out, nil
}

// measureGap runs outside any transaction: it measures the gap's rows against one
// write's vector and returns those its verdict must judge. A judged peer that is no
// longer one has cosine -1: the next verdict must not see it.
func (s *Service) measureGap(ctx context.Context, q peerQuery, g *errGap) ([]peer, error) {
	now := s.now()
	peerOf := func(r *memrow.Row) bool { return isPeer(r, q, now) }
	ps, err := s.gapVectors(ctx, g.rows, peerOf)
	if err != nil {
		return nil, err
	}
	for i := range ps {
		ps[i].cosine = -1
		if peerOf(ps[i].row) {
			ps[i].cosine = embed.Dot(ps[i].vector, q.vector)
		}
	}
	return ps, nil
}

// vectorOf is this process's copy of a committed row's vector, or nil.
func (s *Service) vectorOf(r *memrow.Row) []float32 {
	v, _ := s.vectors.Get(rowVectorKey(r))
	return v
}

// remember keeps the embedded entries' value vectors, before they commit, so this
// process's gap checks and measures read them instead of embedding the rows again.
func (s *Service) remember(entries []*entry) {
	for _, e := range entries {
		if e.row.Embedded() && e.w.vector != nil {
			s.vectors.Add(vectorKey(e.row.EmbeddingModel, len(e.w.vector), e.w.sha), e.w.vector)
		}
	}
}
