package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// MaxBulkEntries is the most entries one memory.bulk_set takes.
const MaxBulkEntries = 1000

// bulkEntry is one entry of memory.bulk_set: memory.set's body plus its key.
type bulkEntry struct {
	setRequest
	Key string `json:"key"`
}

type bulkRequest struct {
	Entries []json.RawMessage `json:"entries"`
	DryRun  bool              `json:"dry_run"`
}

// bulkResult is what happened to one entry.
type bulkResult struct {
	Index       int    `json:"index"`
	MemoryKey   string `json:"memory_key"`
	MemoryID    string `json:"memory_id,omitempty"`
	Version     int64  `json:"version,omitempty"`
	VersionText string `json:"version_text,omitempty"`
	Seq         int64  `json:"seq,omitempty"`
	Verdict     string `json:"verdict"`
	Status      string `json:"status,omitempty"`
	MergedInto  string `json:"merged_into,omitempty"`
}

func (a *bulkAnswer) committed() bool { return len(a.Written) > 0 && !a.DryRun }

func (a *bulkAnswer) outcome() string {
	switch {
	case a.DryRun:
		return "dry_run"
	case len(a.Written) == 0:
		return "nothing_written"
	}
	return "ok"
}

type bulkAnswer struct {
	Written          []bulkResult `json:"written"`
	Merged           []bulkResult `json:"merged"`
	SkippedPinned    []int        `json:"skipped_pinned"`
	SkippedLocked    []int        `json:"skipped_locked"`
	SkippedUnchanged []int        `json:"skipped_unchanged"`
	Blacklisted      []int        `json:"blacklisted"`
	Replaced         []int        `json:"replaced_in_batch"`
	Superseded       []string     `json:"superseded"`
	DryRun           bool         `json:"dry_run,omitempty"`
}

// bulkItem is one entry on its way through the phases.
type bulkItem struct {
	index int
	w     *setWrite
	row   *memrow.Row
	head  *memrow.Row
	v     verdict
	skip  string // why the entry writes nothing; "" when it writes
	// threshold is the entry's conflict threshold (its type's, else the namespace's)
	threshold float64
}

// handleBulkSet is memory.bulk_set, the batch form of the point write: one read of the
// heads, hash-based duplicate detection, one embedding call, the verdicts of memory.set
// (for the first LOOM_BULK_CONFLICT_CHECK_MAX_ENTRIES embedded entries against the
// namespace, and every entry against the batch's earlier entries), and one commit. The
// last entry of a key wins inside a batch. A blacklisted, pinned, locked or unchanged
// entry is skipped, not raised.
func (s *Service) handleBulkSet(c *fiber.Ctx) error {
	return s.measured(c, "memory.bulk_set", func(hold *idemHold) (any, error) {
		return s.bulkSet(c, hold)
	})
}

func (s *Service) bulkSet(c *fiber.Ctx, hold *idemHold) (*bulkAnswer, error) {
	p, ns, err := routeNamespace(c, mayWrite)
	if err != nil {
		return nil, err
	}
	var req bulkRequest
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return nil, err
	}
	if len(req.Entries) == 0 || len(req.Entries) > MaxBulkEntries {
		return nil, httperr.Validation("entries", fmt.Sprintf("entries must hold 1 to %d entries", MaxBulkEntries))
	}
	ans := &bulkAnswer{Written: []bulkResult{}, Merged: []bulkResult{}, SkippedPinned: []int{}, SkippedLocked: []int{},
		SkippedUnchanged: []int{}, Blacklisted: []int{}, Replaced: []int{}, Superseded: []string{}, DryRun: req.DryRun}
	var items []*bulkItem
	last := map[memrow.Identity]int{}
	for i, raw := range req.Entries {
		var e bulkEntry
		if err := httperr.DecodeBody(raw, &e); err != nil {
			return nil, entryError(i, err)
		}
		if len(e.Value) == 0 {
			return nil, httperr.Validation(fmt.Sprintf("entries[%d].value", i), "value is required")
		}
		if e.Proposed || e.IfMatchSHA256 != "" || e.DryRun {
			return nil, httperr.Validation(fmt.Sprintf("entries[%d]", i), "proposed, if_match_sha256 and dry_run are memory.set's; a batch entry takes neither")
		}
		id := memrow.Identity{Org: p.Org, Namespace: ns, Agent: orDash(e.Agent), UserID: orDash(e.UserID), SessionID: orDash(e.SessionID), MemoryKey: e.Key}
		if p.ReadUserID != "" {
			if e.UserID != "" && e.UserID != p.ReadUserID {
				return nil, otherUser()
			}
			id.UserID = p.ReadUserID
		}
		req := e.setRequest
		w, err := newSetWrite("memory.bulk_set", p, id, &req, c.Get("X-Request-Id"))
		if err != nil {
			return nil, entryError(i, err)
		}
		if prev, dup := last[id]; dup {
			ans.Replaced = append(ans.Replaced, items[prev].index)
			items[prev].skip = "replaced"
		}
		last[id] = len(items)
		items = append(items, &bulkItem{index: i, w: w})
	}
	ctx := c.UserContext()
	deadline := s.now().Add(s.cfg.AdmissionDeadline)
	gapFrom := int64(-1)
	var absorbed []peer
	for round := 0; round < s.cfg.AdmissionRounds; round++ {
		if round > 0 && s.now().After(deadline) {
			break
		}
		done, next, more, err := s.bulkRound(ctx, items, ans, gapFrom, absorbed, hold, req.DryRun)
		if err != nil || done {
			return ans, err
		}
		gapFrom, absorbed = next, mergePeers(absorbed, more)
	}
	return nil, contended(errHeadMoved)
}

func entryError(i int, err error) error {
	var fe *memrow.FieldError
	if errors.As(err, &fe) {
		return &memrow.FieldError{Field: fmt.Sprintf("entries[%d].%s", i, fe.Field), Code: fe.Code, Message: fe.Message}
	}
	var he *httperr.Error
	if errors.As(err, &he) && he.Field != "" {
		c := *he
		c.Field = fmt.Sprintf("entries[%d].%s", i, he.Field)
		return &c
	}
	return err
}

// bulkState is what a bulk round reads of Postgres in one round trip.
type bulkState struct {
	policy    *policy
	keyHeads  map[string][]*memrow.Row // by memory_key, every identity
	bySHA     map[string][]*memrow.Row // heads holding an entry's exact value
	watermark int64
}

func (s *Service) readBulk(ctx context.Context, org, ns string, items []*bulkItem) (*bulkState, error) {
	st := &bulkState{keyHeads: map[string][]*memrow.Row{}, bySHA: map[string][]*memrow.Row{}}
	var keys, shas []string
	for _, it := range items {
		keys = append(keys, it.w.id.MemoryKey)
		shas = append(shas, it.w.sha)
	}
	b := &pgx.Batch{}
	finish := queuePolicy(b, org, ns)
	var byKey, bySHA []*memrow.Row
	queueHeads(b, &byKey, `SELECT row FROM loom.memory_current WHERE org = $1 AND namespace = $2 AND memory_key = ANY($3)`, org, ns, keys)
	queueHeads(b, &bySHA, `SELECT row FROM loom.memory_current WHERE org = $1 AND namespace = $2 AND content_sha256 = ANY($3)`, org, ns, shas)
	s.queueWatermark(b, org, ns, &st.watermark)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	var err error
	if st.policy, err = finish(); err != nil {
		return nil, err
	}
	for _, h := range byKey {
		st.keyHeads[h.MemoryKey] = append(st.keyHeads[h.MemoryKey], h)
	}
	for _, h := range bySHA {
		st.bySHA[h.ContentSHA256] = append(st.bySHA[h.ContentSHA256], h)
	}
	return st, nil
}

// bulkRound runs one admission round over every entry. It returns done with the
// answer filled, or the gap to start after and the gap rows measured.
func (s *Service) bulkRound(ctx context.Context, items []*bulkItem, ans *bulkAnswer, gapFrom int64, absorbed []peer, hold *idemHold, dryRun bool) (bool, int64, []peer, error) {
	now := s.now()
	org, ns := items[0].w.id.Org, items[0].w.id.Namespace
	st, err := s.readBulk(ctx, org, ns, items)
	if err != nil {
		return false, 0, nil, httperr.Store("reading the batch's heads and policy", err)
	}
	gapFrom = max(gapFrom, st.watermark)
	pol := st.policy
	threshold := func(t TypeConfig) float64 { return s.threshold(pol.config, t) }
	ans.SkippedPinned, ans.SkippedLocked, ans.SkippedUnchanged, ans.Blacklisted = []int{}, []int{}, []int{}, []int{}

	// Phases 1 to 7 per entry, against the heads read above.
	var live []*bulkItem
	for _, it := range items {
		if it.skip == "replaced" {
			continue
		}
		it.skip, it.v = "", verdict{kind: VerdictNew}
		w := it.w
		it.head = nil
		for _, h := range st.keyHeads[w.id.MemoryKey] {
			if h.Identity == w.id {
				it.head = h
			}
		}
		head := it.head
		isLive := head != nil && head.Live(now)
		memoryType := w.req.MemoryType
		if memoryType == "" {
			memoryType = memrow.DefaultMemoryType
			if isLive {
				memoryType = head.MemoryType
			}
		}
		if to := pol.config.typeConfig(memoryType).Retype; to != "" {
			memoryType = to
		}
		typeCfg := pol.config.typeConfig(memoryType)
		same := isLive && head.Established(now) && head.ContentSHA256 == w.sha
		if isLive && !same && head.ContentSHA256 != w.sha {
			if head.Locked {
				it.skip = "locked"
				ans.SkippedLocked = append(ans.SkippedLocked, it.index)
				continue
			}
			if head.Pinned && !w.req.Pin {
				it.skip = "pinned"
				ans.SkippedPinned = append(ans.SkippedPinned, it.index)
				continue
			}
		}
		limit := s.cfg.CharLimit
		if typeCfg.CharLimit > 0 {
			limit = typeCfg.CharLimit
		}
		if err := memrow.CheckCharLimit(w.value, limit); err != nil {
			return false, 0, nil, entryError(it.index, err)
		}
		if _, hit := pol.blacklisted(w.valueText); hit {
			it.skip = "blacklisted"
			ans.Blacklisted = append(ans.Blacklisted, it.index)
			continue
		}
		sensitivity := memrow.SensitivityNormal
		if len(w.detected) > 0 || w.req.Sensitivity == memrow.SensitivityHigh {
			sensitivity = memrow.SensitivityHigh
		}
		exp := resolveExpiry(expiryInput{now: now, ttlSeconds: w.req.TTLSeconds, validTo: w.req.ValidTo, typeConfig: typeCfg,
			namespace: pol.config, high: sensitivity == memrow.SensitivityHigh, sensitiveRetention: s.cfg.SensitiveRetention})
		// An entry repeating the stored bytes writes only when it changes the
		// sensitivity, adds a pin, sets a ttl or declares other entities or relations: a
		// replayed batch must not revive a retired row over the write that retired it.
		if isLive && head.ContentSHA256 == w.sha && sensitivity == head.Sensitivity && (!w.req.Pin || head.Pinned) && w.req.TTLSeconds == nil &&
			!w.changesGraph(head, &pol.config) {
			it.skip = "unchanged"
			ans.SkippedUnchanged = append(ans.SkippedUnchanged, it.index)
			continue
		}
		if isLive && head.Locked {
			// As in memory.set: a locked row keeps its expiry, and an entry that asks
			// to move it is skipped.
			if (w.req.TTLSeconds != nil || w.req.ValidTo != nil) && !sameTime(exp.at, head.ExpiresAt) {
				it.skip = "locked"
				ans.SkippedLocked = append(ans.SkippedLocked, it.index)
				continue
			}
			exp = expiry{at: head.ExpiresAt, onExpire: head.OnExpire}
		}
		it.row = s.buildSetRow(w, head, now, memoryType, sensitivity, exp, &pol.config)
		if same {
			it.row.ReinforcementCount = head.ReinforcementCount + 1
			it.row.Status = head.Status
			it.v.kind = VerdictRestatement
		} else if isLive && head.ContentSHA256 == w.sha {
			it.row.Status = memrow.StatusActive // a changed level, pin or expiry writes the row as active
		}
		w.embedded = it.row.Embedded()
		if !w.embedded {
			it.row.EmbeddingModel, it.row.EmbeddingDim = "", 0
		}
		live = append(live, it)
	}

	// Phases 8 and 9: one embedding call for every embedded entry's value and key words.
	if err := s.embedBulk(ctx, live); err != nil {
		return false, 0, nil, err
	}

	// Phase 10: verdicts, in batch order, against the namespace's peers and the
	// batch's earlier entries.
	checked := 0
	type extPeer struct{ peers []peer }
	external := make([]extPeer, len(live))
	var toCheck []int
	for i, it := range live {
		if it.w.embedded && it.v.kind != VerdictRestatement && pol.config.ConflictPolicy != PolicyAppendOnly && checked < s.cfg.BulkConflictCheckMax {
			toCheck = append(toCheck, i)
			checked++
		}
	}
	if err := s.parallelPeers(ctx, live, toCheck, func(i int, ps []peer) { external[i].peers = ps }); err != nil {
		return false, 0, nil, chUnavailable("reading the batch's peers", err)
	}
	var batchPeers []peer
	for i, it := range live {
		if it.v.kind == VerdictRestatement || pol.config.ConflictPolicy == PolicyAppendOnly {
			if it.w.embedded {
				batchPeers = append(batchPeers, peer{row: it.row})
			}
			continue
		}
		q := peerQuery{id: it.w.id, memoryType: it.row.MemoryType, vector: it.w.vector, readUserID: it.w.p.ReadUserID}
		peers := external[i].peers
		// Hash-based duplicate detection reaches every entry, checked or not.
		for _, h := range st.bySHA[it.w.sha] {
			if isPeer(h, q, now) {
				peers = append(peers, peer{row: h, cosine: 1})
			}
		}
		for _, bp := range batchPeers {
			if bp.row.MemoryType == it.row.MemoryType && bp.row.MemoryKey != it.row.MemoryKey && it.w.embedded &&
				(it.w.p.ReadUserID == "" || bp.row.UserID == it.w.p.ReadUserID || bp.row.Pinned) {
				peers = append(peers, peer{row: bp.row, cosine: embed.Dot(bp.vec(live), it.w.vector)})
			}
		}
		var gapPeers []peer
		for _, a := range absorbed {
			if isPeer(a.row, q, now) {
				gapPeers = append(gapPeers, peer{row: a.row, cosine: embed.Dot(a.vector, it.w.vector)})
			}
		}
		peers = mergePeers(peers, gapPeers)
		it.threshold = threshold(pol.config.typeConfig(it.row.MemoryType))
		it.v = decide(verdictInput{row: it.row, valueText: it.w.valueText, policy: pol.config.ConflictPolicy,
			threshold: it.threshold, duplicateThreshold: s.cfg.DuplicateThreshold, peers: peers})
		switch it.v.kind {
		case VerdictMerge:
			it.skip = "merged"
		case VerdictPinned:
			it.skip = "pinned"
			ans.SkippedPinned = append(ans.SkippedPinned, it.index)
		default:
			if it.w.embedded {
				batchPeers = append(batchPeers, peer{row: it.row})
			}
		}
	}

	// Phases 12 and 13: the entries' rows, then one copy per peer the verdicts change.
	rows, superseded := s.bulkRows(live, st, pol, now)
	ans.Merged, ans.Written, ans.Superseded = []bulkResult{}, []bulkResult{}, superseded
	for _, it := range live {
		if it.skip == "merged" {
			ans.Merged = append(ans.Merged, bulkResult{Index: it.index, MemoryKey: it.w.id.MemoryKey, Verdict: VerdictMerge, MergedInto: it.v.target.MemoryID})
		}
	}
	if len(rows) == 0 {
		return true, 0, nil, nil
	}
	plan := &commitPlan{org: org, namespace: ns, rows: rows, requestID: items[0].w.requestID, policyGeneration: pol.generation,
		gapFrom: gapFrom, idem: hold}
	if pol.config.ConflictPolicy != PolicyAppendOnly {
		plan.gapCheck = s.bulkGapCheck(live)
	}
	if dryRun {
		err = s.dryGap(ctx, plan)
	} else {
		err = s.commit(ctx, plan)
	}
	var gap *errGap
	switch {
	case errors.As(err, &gap):
		measured, err := s.gapVectors(ctx, gap.rows)
		if err != nil {
			return false, 0, nil, err
		}
		return false, gap.upTo, measured, nil
	case errors.Is(err, errHeadMoved), errors.Is(err, errPolicyMoved):
		return false, gapFrom, nil, nil
	case errors.Is(err, errGapTooLarge):
		return false, 0, nil, httperr.Unavailable(httperr.CodeProjectionBehind, "ClickHouse is too far behind the namespace to judge this batch; retry", err)
	case err != nil:
		return false, 0, nil, commitError(err)
	}
	for _, it := range live {
		if it.skip != "" {
			continue
		}
		r := it.row
		if !dryRun && it.w.embedded {
			s.vectors.Add(vectorKey(r.Org, r.Namespace, r.Seq), it.w.vector)
		}
		res := bulkResult{Index: it.index, MemoryKey: r.MemoryKey, MemoryID: r.MemoryID, Verdict: it.v.kind, Status: r.Status}
		if !dryRun {
			res.Version, res.VersionText, res.Seq = r.Version, memrow.VersionText(r.Version), r.Seq
		}
		ans.Written = append(ans.Written, res)
	}
	return true, 0, nil, nil
}

// gapVectors gives each gap row its vector: this process's copy of one it committed,
// else its text embedded again (in one call). Each entry then measures them itself.
func (s *Service) gapVectors(ctx context.Context, rows []*memrow.Row) ([]peer, error) {
	out := make([]peer, len(rows))
	var texts []string
	var missing []int
	for i, r := range rows {
		out[i] = peer{row: r, vector: s.vectorOf(r)}
		if out[i].vector == nil && r.Embedded() {
			texts, missing = append(texts, memrow.ValueText(r.Value)), append(missing, i)
		}
	}
	if len(texts) > 0 {
		vs, err := s.embedder.Embed(ctx, texts)
		if err != nil {
			if errors.Is(err, embed.ErrEmbedderUnavailable) {
				return nil, httperr.Unavailable(httperr.CodeEmbedderDown, "the embedder is unavailable; retry", err)
			}
			return nil, httperr.Store("measuring the admission gap", err)
		}
		for k, i := range missing {
			out[i].vector = vs[k]
		}
	}
	return out, nil
}

func (bp peer) vec(live []*bulkItem) []float32 {
	for _, it := range live {
		if it.row == bp.row {
			return it.w.vector
		}
	}
	return nil
}

// vectorOf is this process's copy of a committed row's vector, or nil.
func (s *Service) vectorOf(r *memrow.Row) []float32 {
	v, _ := s.vectors.Get(vectorKey(r.Org, r.Namespace, r.Seq))
	return v
}

func (s *Service) embedBulk(ctx context.Context, items []*bulkItem) error {
	var texts []string
	type part struct {
		from, to int
		split    func([][]float32)
		it       *bulkItem
	}
	var parts []part
	for _, it := range items {
		if !it.w.embedded {
			continue
		}
		ts, split := embedTexts(it.w)
		parts = append(parts, part{from: len(texts), to: len(texts) + len(ts), split: split, it: it})
		texts = append(texts, ts...)
	}
	if len(texts) == 0 {
		return nil
	}
	vs, err := s.embedder.Embed(ctx, texts)
	if err != nil {
		if errors.Is(err, embed.ErrEmbedderUnavailable) {
			return httperr.Unavailable(httperr.CodeEmbedderDown, "the embedder is unavailable; retry", err)
		}
		return httperr.Store("embedding the batch", err)
	}
	for _, p := range parts {
		p.split(vs[p.from:p.to])
		p.it.row.EmbeddingModel, p.it.row.EmbeddingDim = s.embedder.Model(), len(p.it.w.vector)
	}
	return nil
}

// parallelPeers reads the namespace's peers of the given entries, a few at a time.
func (s *Service) parallelPeers(ctx context.Context, items []*bulkItem, idx []int, got func(int, []peer)) error {
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, i := range idx {
		it := items[i]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ps, err := s.readPeers(ctx, peerQuery{id: it.w.id, memoryType: it.row.MemoryType, vector: it.w.vector, readUserID: it.w.p.ReadUserID})
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			got(i, ps)
		}()
	}
	wg.Wait()
	return firstErr
}

// bulkRows builds the batch's rows: each written entry's own row, marked as its
// verdict says, and one copy of every head outside the batch the verdicts change,
// with every change to it applied once.
func (s *Service) bulkRows(items []*bulkItem, st *bulkState, pol *policy, now time.Time) ([]*pending, []string) {
	var rows []*pending
	inBatch := map[*memrow.Row]bool{}
	for _, it := range items {
		if it.skip == "" {
			inBatch[it.row] = true
		}
	}
	copies := map[string]*pending{}
	var order []string
	copyFor := func(h *memrow.Row) *memrow.Row {
		if inBatch[h] {
			return h
		}
		k := heads.IdentityKey(h.Identity)
		if p, ok := copies[k]; ok {
			return p.row
		}
		p := &pending{op: "memory.bulk_set", event: events.TypeStatusChanged, row: copyOf(h), readVersion: h.Version}
		copies[k] = p
		order = append(order, k)
		return p.row
	}
	var superseded []string
	for _, it := range items {
		if it.skip != "" {
			continue
		}
		row := it.row
		event := events.TypeWritten
		var readVersion int64
		if it.head != nil {
			readVersion = it.head.Version
			if it.head.Live(now) {
				event = events.TypeRevised
			}
		}
		p := &pending{own: true, op: "memory.bulk_set", event: event, row: row, readVersion: readVersion}
		if it.w.embedded {
			p.vector, p.keyVector, p.chunkVectors = it.w.vector, it.w.keyVector, it.w.chunkVectors
		}
		rows = append(rows, p)
		switch it.v.kind {
		case VerdictDuplicate:
			row.Status, row.DuplicateOf = memrow.StatusDuplicate, it.v.target.MemoryID
		case VerdictRefines:
			if !it.v.target.Locked {
				c := copyFor(it.v.target)
				c.Status, c.SupersededBy = memrow.StatusSuperseded, row.MemoryID
				superseded = append(superseded, it.v.target.MemoryID)
			}
		case VerdictConflict:
			row.Status = memrow.StatusConflicted
			for _, peerRow := range it.v.conflicts {
				row.ConflictWith = appendOnce(row.ConflictWith, peerRow.MemoryID)
				if peerRow.Locked {
					continue
				}
				c := copyFor(peerRow)
				c.Status = memrow.StatusConflicted
				c.ConflictWith = appendOnce(c.ConflictWith, row.MemoryID)
			}
		}
		if pol.config.ConflictPolicy != PolicyAppendOnly && it.v.kind != VerdictRestatement {
			var keyHeads []*memrow.Row
			keyHeads = append(keyHeads, st.keyHeads[row.MemoryKey]...)
			for _, o := range sameKeyHeads(keyHeads, it.w.id, now) {
				if pol.config.ConflictPolicy == PolicyNewestWins && !o.Locked {
					c := copyFor(o)
					c.Status, c.SupersededBy = memrow.StatusSuperseded, row.MemoryID
					superseded = append(superseded, o.MemoryID)
				} else {
					row.JudgementOwed = true
				}
			}
		}
	}
	written := map[string]bool{}
	for _, p := range rows {
		written[heads.IdentityKey(p.row.Identity)] = true
	}
	var retired []string
	for _, id := range superseded {
		if !contains(retired, id) {
			retired = append(retired, id)
		}
	}
	superseded = retired
	for _, k := range order {
		if !written[k] { // a head the batch writes anew needs no copy
			rows = append(rows, copies[k])
		}
	}
	return rows, superseded
}

// bulkGapCheck sends the batch back when a revision committed since its capture may
// be a peer of any of its entries.
func (s *Service) bulkGapCheck(items []*bulkItem) func([]gapRevision) error {
	return func(gap []gapRevision) error {
		now := s.now()
		e := &errGap{upTo: gap[len(gap)-1].seq}
		for _, g := range gap {
			for _, it := range items {
				if it.skip != "" || !it.w.embedded || it.v.kind == VerdictRestatement {
					continue
				}
				q := peerQuery{id: it.w.id, memoryType: it.row.MemoryType, vector: it.w.vector, readUserID: it.w.p.ReadUserID}
				if !isPeer(g.row, q, now) {
					continue
				}
				if g.row.ContentSHA256 != it.w.sha {
					if v, ok := s.vectors.Get(vectorKey(g.row.Org, g.row.Namespace, g.seq)); ok && embed.Dot(v, it.w.vector) < it.threshold-vectorMargin {
						continue
					}
				}
				e.rows = append(e.rows, g.row)
				break
			}
		}
		if len(e.rows) == 0 {
			return nil
		}
		return e
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
