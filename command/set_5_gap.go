package command

import (
	"context"
	"fmt"
	"sort"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// Stage 5, the gap check (set.go lists the stages). A verdict read in the search index
// (or ClickHouse) can be wrong by the time the write commits: a peer committed
// meanwhile is not among the rows it read. Admission closes that window with
// generations. Before its peer read a write captures the namespace's position in the
// process's index, or, when ClickHouse serves the read, the projection watermark (every
// revision at or below it is in what the read sees). At its commit, under the
// generation lock, the revisions committed after the capture (the gap) are examined:
// what cannot be a peer is ruled out on what the commit holds; anything else sends the
// write back to its verdict with those rows measured and added.

// vectorMargin is how far below the threshold a locally measured row must be to be
// ruled out: a peer read would measure the same row differently by as much. ClickHouse
// stores the same float32 vector (rounding only); the index stores int8 codes, whose
// cosines are within 0.004 of the float32 one (internal/searchindex), so a row the gap
// check rules out is one no peer read could have put over the threshold.
const vectorMargin = 0.005

// gapRevision is a revision committed between a write's capture and its commit.
type gapRevision struct {
	seq int64
	row *memrow.Row
}

// errGap sends a write back to its verdict: revisions in the gap may be peers.
type errGap struct {
	rows []*memrow.Row
	upTo int64 // the last seq the gap covered
}

func (e *errGap) Error() string {
	return fmt.Sprintf("%d revisions committed since the capture may be peers", len(e.rows))
}

// gapCheck returns the check a round's commit runs on its gap. A gap row is ruled out
// when it is the write's own key (rechecked under its head lock), cannot be a peer
// (type, liveness, status, scope), or was measured here and is clearly out of reach.
// A new revision of a peer the verdict judged is never ruled out: the verdict read it.
func (s *Service) gapCheck(q peerQuery, sha string, judged []peer, threshold float64) func([]gapRevision) error {
	threshold = reach(threshold, s.judgementFloor())
	return func(gap []gapRevision) error {
		latest := map[string]gapRevision{}
		var order []string
		for _, g := range gap {
			k := heads.IdentityKey(g.row.Identity)
			if _, seen := latest[k]; !seen {
				order = append(order, k)
			}
			latest[k] = g
		}
		judgedKeys := map[string]bool{}
		for _, p := range judged {
			judgedKeys[heads.IdentityKey(p.row.Identity)] = true
		}
		now := s.now()
		e := &errGap{upTo: gap[len(gap)-1].seq}
		for _, k := range order {
			g := latest[k]
			switch {
			case g.row.MemoryKey == q.id.MemoryKey:
				continue // the write's own key is rechecked under its head lock; another session's is markSameKey's (set_4_rows.go)
			case judgedKeys[k]:
			case !isPeer(g.row, q, now):
				continue
			case g.row.ContentSHA256 == sha:
			default:
				if v, ok := s.vectors.Get(rowVectorKey(g.row)); ok && embed.Dot(v, q.vector) < threshold-vectorMargin {
					continue
				}
			}
			e.rows = append(e.rows, g.row)
		}
		if len(e.rows) == 0 {
			return nil
		}
		return e
	}
}

// groupGap is what a commit read of its plans' gaps: the revisions committed after the
// earliest capture a plan can still be checked from, in seq order, and for each plan
// whether an erasure in its gap removed a memory its verdict links to.
type groupGap struct {
	rows         []gapRevision
	linkedErased []bool
	unnamed      heads.Unnamed // rows whose user their text does not name, until named
}

// queueGroupGap queues the reads of the plans' gaps. A plan whose capture is more
// than LOOM_PG_ADMISSION_GAP_MAX below the latest one's has a gap too large to check
// whatever the read holds, so the read starts no lower than that.
func (s *Service) queueGroupGap(b *pgx.Batch, plans []*commitPlan) *groupGap {
	g := &groupGap{linkedErased: make([]bool, len(plans))}
	lo, hi, checked := int64(0), int64(0), false
	for i, p := range plans {
		if p.gapCheck == nil {
			continue
		}
		if !checked || p.gapFrom < lo {
			lo = p.gapFrom
		}
		if !checked || p.gapFrom > hi {
			hi = p.gapFrom
		}
		checked = true
		s.queueErasedInGap(b, p.org, p.namespace, linkedIDs(p.rows), p.gapFrom, &g.linkedErased[i])
	}
	if !checked {
		return g
	}
	gapMax := int64(s.cfg.AdmissionGapMax)
	lo = max(lo, hi-gapMax)
	queueGap(b, s.kek, &g.unnamed, plans[0].org, plans[0].namespace, lo, int(hi-lo+gapMax+1), &g.rows)
	return g
}

// of is plan i's gap: the revisions read after its capture, then the rows of the
// plans before it in the group.
func (g *groupGap) of(from int64, before []gapRevision) []gapRevision {
	start := sort.Search(len(g.rows), func(k int) bool { return g.rows[k].seq > from })
	if len(before) == 0 {
		return g.rows[start:]
	}
	return append(append([]gapRevision(nil), g.rows[start:]...), before...)
}

// linkedIDs are the memories the rows' verdict links them to: the links of the
// write's own rows. A copy of a peer links it to an own row only (the pair its
// conflict_with gained, the row that retires it); the rest of its conflict_with is
// its head's, which the verdict did not make and a new round would carry again, and
// at 10,000 memories the copies' lists were hundreds of ids a commit.
func linkedIDs(rows []*pending) []string {
	var ids []string
	for _, p := range rows {
		if !p.own {
			continue
		}
		r := p.row
		for _, id := range r.ConflictWith {
			ids = appendOnce(ids, id)
		}
		for _, id := range []string{r.SupersededBy, r.DuplicateOf} {
			if id != "" {
				ids = appendOnce(ids, id)
			}
		}
	}
	return ids
}

// dryGap runs a plan's gap check without committing: a dry run's verdict covers what
// was committed up to now, as a write's would.
func (s *Service) dryGap(ctx context.Context, plan *commitPlan) error {
	if plan.gapCheck == nil {
		return nil
	}
	gen, err := generations.Read(ctx, s.pool, plan.org, plan.namespace)
	if err != nil {
		return fmt.Errorf("read the generation: %w", err)
	}
	if gen <= plan.gapFrom {
		return nil
	}
	if gen-plan.gapFrom > int64(s.cfg.AdmissionGapMax) {
		return &errGapTooLarge{upTo: gen}
	}
	gap, err := readGap(ctx, s.pool, s.kek, plan.org, plan.namespace, plan.gapFrom, int(gen-plan.gapFrom))
	if err != nil || len(gap) == 0 {
		return err
	}
	return plan.gapCheck(gap)
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

// vectorCacheSize bounds the value vectors kept of this process's writes.
const vectorCacheSize = 20000

func newVectorCache() *lru.Cache[string, []float32] {
	c, _ := lru.New[string, []float32](vectorCacheSize)
	return c
}

// vectorKey names a row's value vector by the model that embedded it and the value's
// hash: a vector is a function of the two, so one remembered when its write was
// embedded is right for any revision holding that content, whether or not that write
// committed. Kept by seq, it was only remembered after its commit answered, and the
// commit queued behind it on the namespace's lock found the gap row unmeasured and
// went back to its verdict: 40% of the commits of eight writers on one namespace.
func vectorKey(model string, dim int, sha string) string {
	return fmt.Sprintf("%s/%d/%s", model, dim, sha)
}

// rowVectorKey names a stored row's value vector.
func rowVectorKey(r *memrow.Row) string {
	return vectorKey(r.EmbeddingModel, r.EmbeddingDim, r.ContentSHA256)
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
