package workers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/watermarks"
)

// The conflict resolver (memory-architecture, "The conflict resolver"). Its consumer
// group queues every value write its admission marked judgement_owed (a peer at the
// floor, a conflict verdict, the key held by another session of its user); a pass
// judges each queued version once: its cluster (resolver_cluster.go), one strict-JSON
// call (resolver_prompt.go), the fold of each peer's verdict (resolver_fold.go), the
// actions through the commit (resolver_act.go), then the stamp. The call bills the
// namespace under PurposeConflictResolver, whose allowance is the resolver's share of
// the daily cap.

// RunResolver runs the conflict resolver's passes until ctx ends.
func (s *Service) RunResolver(ctx context.Context) {
	cfg := s.cfg.Resolver
	s.runPasses(ctx, workerResolver, cfg.Interval, cfg.MaxOwedAge+24*time.Hour, s.resolvePass)
}

// judgeOutcome is how one row's judgement ended.
type judgeOutcome int

const (
	judgeDone      judgeOutcome = iota // stamped (judged, skipped or errored)
	judgeDeferred                      // stays owed, no attempt counted (cap, erasure, projection behind, locks)
	judgeRetry                         // stays owed, one attempt counted (a flag neither answer judged)
	judgeTransient                     // the provider failed transiently: owed, no attempt
	judgeRefused                       // the provider refused the request: stamped errored when the pass ends
	judgeStopped                       // the provider refused the key or the model: the pass stops
)

// judgement is what a judged row's stamp records: no text.
type judgement struct {
	Calls  int          `json:"calls"`
	Pairs  []judgedPair `json:"pairs,omitempty"`
	Reason string       `json:"reason,omitempty"`
}

// judgedPair is one peer's verdict and what came of it.
type judgedPair struct {
	Peer       string       `json:"peer"`
	Cosine     float64      `json:"cosine"`
	Verdict    judgeVerdict `json:"verdict,omitempty"`
	Confidence float64      `json:"confidence,omitempty"`
	Action     pairAction   `json:"action"`
	Done       bool         `json:"done"`
}

// resolvePass judges one batch of owed rows, LOOM_MEMORY_CONFLICT_RESOLVER_CONCURRENCY
// at a time. It ends early when the provider refuses the key or the model, or three
// rows in a row fail transiently (an outage); a namespace whose requests the provider
// refused three times in a row waits five minutes.
func (s *Service) resolvePass(ctx context.Context) passResult {
	cfg := s.cfg.Resolver
	items, res, ok := s.claimPass(ctx, workerResolver, cfg.Batch, cfg.MaxOwedAge, true)
	if !ok || len(items) == 0 {
		return res
	}
	pass := &resolverPass{s: s, refusals: map[string]int{}, refusedNS: map[string]bool{}}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	for _, it := range items {
		if pass.halted() || pctx.Err() != nil {
			s.giveBack(it, 0, false)
			continue
		}
		if pass.nsRefused(it.namespace) {
			s.giveBack(it, workerPause, false)
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out := s.judgeItem(pctx, it)
			pass.record(it, out)
			if pass.halted() {
				stop()
			}
		}()
	}
	wg.Wait()
	// Refused rows are stamped when the pass ends, unless their namespace stopped.
	for _, it := range pass.refusedItems {
		if pass.nsRefused(it.namespace) {
			s.giveBack(it, workerPause, false)
			continue
		}
		if _, err := s.finishWork(context.WithoutCancel(ctx), it, outcomeErrored, marshalDetail(judgement{Calls: 1, Reason: "refused"})); err != nil {
			s.log.Warn("conflict resolver: stamping a refused row failed", "err", err)
		}
	}
	res.done, res.errors, res.stopped = pass.done, pass.errors, pass.halted()
	return res
}

// resolverPass is one pass's running account of its rows.
type resolverPass struct {
	s            *Service
	mu           sync.Mutex
	done, errors int
	transients   int // in a row
	stopped      bool
	refusals     map[string]int // namespace → refused rows in a row
	refusedNS    map[string]bool
	refusedItems []workItem
}

func (p *resolverPass) record(it workItem, out judgeOutcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if out != judgeTransient {
		p.transients = 0
	}
	if out != judgeRefused {
		p.refusals[it.namespace] = 0
	}
	switch out {
	case judgeDone:
		p.done++
	case judgeTransient:
		p.errors++
		if p.transients++; p.transients >= 3 {
			p.stopped = true
		}
	case judgeRefused:
		p.errors++
		p.refusedItems = append(p.refusedItems, it)
		if p.refusals[it.namespace]++; p.refusals[it.namespace] >= 3 {
			p.refusedNS[it.namespace] = true
		}
	case judgeStopped:
		p.errors++
		p.stopped = true
	case judgeRetry, judgeDeferred:
	}
}

func (p *resolverPass) halted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

func (p *resolverPass) nsRefused(ns string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusedNS[ns]
}

// giveBack releases an item after the pass that held it, whatever became of the pass.
func (s *Service) giveBack(it workItem, delay time.Duration, attempt bool) {
	if err := s.releaseWork(context.Background(), it, delay, attempt); err != nil {
		s.log.Warn("worker: giving an item back failed; its lease will lapse", "worker", it.worker, "err", err)
	}
}

// stamp finishes an item; an erasure of its org running keeps it owed.
func (s *Service) stamp(ctx context.Context, it workItem, outcome string, detail any) judgeOutcome {
	ok, err := s.finishWork(context.WithoutCancel(ctx), it, outcome, marshalDetail(detail))
	switch {
	case err != nil:
		s.log.Warn("worker: stamping an item failed; it stays owed", "worker", it.worker, "err", err)
		s.giveBack(it, s.soon(it.worker), false)
		return judgeDeferred
	case !ok:
		s.giveBack(it, s.soon(it.worker), false)
		return judgeDeferred
	}
	return judgeDone
}

// judgeItem judges one owed row.
func (s *Service) judgeItem(ctx context.Context, it workItem) judgeOutcome {
	out, err := s.judge(ctx, it)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("conflict resolver: judging a row failed; it stays owed", "org", it.org, "namespace", it.namespace,
			"memory_id", it.memoryID, "err", err)
	}
	return out
}

// judge is the row's judgement: its checks and cluster (prepareJudgement), the call,
// then the fold and actions (actOnAnswers) and its stamp. What it cannot do now it
// gives back, owed.
func (s *Service) judge(ctx context.Context, it workItem) (judgeOutcome, error) {
	defer func() {
		if r := recover(); r != nil {
			s.giveBack(it, s.soon(it.worker), false)
			panic(r)
		}
	}()
	soon := s.soon(it.worker)
	later := func(delay time.Duration, err error) (judgeOutcome, error) {
		s.giveBack(it, delay, false)
		return judgeDeferred, err
	}
	c, h := s.prepareJudgement(ctx, it)
	switch {
	case h.skip != "":
		return s.stamp(ctx, it, outcomeSkipped, judgement{Reason: h.skip}), nil
	case c == nil:
		return later(cmp.Or(h.delay, soon), h.err)
	}
	bill := llm.Bill{Org: it.org, Namespace: it.namespace, Purpose: llm.PurposeConflictResolver}
	var answers map[int]peerJudgement
	calls := 0
	o := s.models.Step(ctx, bill, s.outage, func(ctx context.Context) error {
		var err error
		answers, calls, err = s.askJudge(ctx, bill, c.head, c.asserted, c.peers)
		return err
	})
	switch o.Class {
	case 0:
		if o.Err != nil {
			return later(soon, o.Err)
		}
	case llm.ClassStopped:
		s.giveBack(it, 0, false)
		return judgeStopped, nil
	case llm.ClassCapped, llm.ClassNotConfigured:
		// Capped before the call: until the cap resets.
		return later(cmp.Or(o.After, soon), nil)
	case llm.ClassTransient:
		s.giveBack(it, soon, false)
		return judgeTransient, nil
	case llm.ClassRefused:
		return judgeRefused, nil // stamped when the pass ends
	case llm.ClassMalformed:
		return s.stamp(ctx, it, outcomeErrored, judgement{Calls: calls, Reason: "nothing usable in two answers"}), nil
	}
	return s.actOnAnswers(ctx, it, c, answers, calls)
}

// judgeCase is what a row's call judges: the row, its namespace's conflict policy, its
// cluster, and when its value was first asserted.
type judgeCase struct {
	head     *memrow.Row
	policy   string
	peers    []clusterPeer
	asserted time.Time
}

// judgeHalt is why a judgement ends before its call: skip stamps the row skipped for
// that reason; otherwise the row is given back, owed, after delay (0: soon).
type judgeHalt struct {
	skip  string
	delay time.Duration
	err   error
}

// prepareJudgement checks the row, waits for the projection to hold it, and reads its
// cluster, rechecked right before the call. A nil case says why not.
func (s *Service) prepareJudgement(ctx context.Context, it workItem) (*judgeCase, judgeHalt) {
	skip := func(reason string) (*judgeCase, judgeHalt) { return nil, judgeHalt{skip: reason} }
	fail := func(err error) (*judgeCase, judgeHalt) { return nil, judgeHalt{err: err} }
	head, err := s.headOfID(ctx, it.org, it.namespace, it.memoryID)
	if err != nil {
		return fail(err)
	}
	now := s.now()
	switch {
	case head == nil || !head.Served(now):
		return skip("the row is no longer served")
	case head.ContentSHA256 != it.sha:
		return skip("the row holds another value: its own write owes its judgement")
	case head.Pinned:
		return skip("a pinned row is never judged")
	}
	pol, err := s.cmd.NamespacePolicy(ctx, it.org, it.namespace)
	if err != nil {
		return fail(err)
	}
	if pol.Conflict == command.PolicyAppendOnly {
		return skip("append_only judges nothing")
	}
	// The nearest rows are read from the projection: it must hold what was committed
	// up to this row.
	mark, err := watermarks.Read(ctx, s.pool, s.pipe.Projection, it.org, it.namespace)
	if err != nil {
		return fail(err)
	}
	if mark < it.seq {
		return nil, judgeHalt{delay: time.Second}
	}
	peers, err := s.cluster(ctx, head)
	if err != nil {
		return fail(err)
	}
	peerRows := make([]*memrow.Row, len(peers))
	for i, p := range peers {
		peerRows[i] = p.row
	}
	undone, err := s.cmd.UndoneBetween(ctx, head, peerRows)
	if err != nil {
		return fail(err)
	}
	// An Undo's pair, and a pair of the namespace's conflict allowlist, are left alone.
	peers = slicesFilter(peers, func(p clusterPeer) bool {
		return !undone[p.row.MemoryID] && !pol.Allowlisted(head.MemoryID, p.row.MemoryID)
	})
	// The labels are outside the content hash: read the rows again right before the
	// prompt, and send none that became high, pinned or changed.
	if head, peers, err = s.recheckCluster(ctx, head, peers); err != nil {
		return fail(err)
	}
	if head == nil {
		return skip("the row changed before its call")
	}
	if len(peers) == 0 {
		return skip("no peer at the floor")
	}
	c := &judgeCase{head: head, policy: pol.Conflict, peers: peers}
	if c.asserted, err = s.assertedAt(ctx, head); err != nil {
		return fail(err)
	}
	for i := range c.peers {
		if c.peers[i].asserted, err = s.assertedAt(ctx, c.peers[i].row); err != nil {
			return fail(err)
		}
	}
	if erasing, err := s.orgErasing(ctx, it.org); err != nil || erasing {
		return fail(err) // no call is paid for a row that may not be acted on
	}
	return c, judgeHalt{}
}

// actOnAnswers folds each peer's verdict into an action, acts on it through the
// commit, and stamps the row with what came of each pair. A flag neither answer
// judged sends the row back, three times at most.
func (s *Service) actOnAnswers(ctx context.Context, it workItem, c *judgeCase, answers map[int]peerJudgement, calls int) (judgeOutcome, error) {
	cfg := s.cfg.Resolver
	soon := s.soon(it.worker)
	later := func(err error) (judgeOutcome, error) {
		s.giveBack(it, soon, false)
		return judgeDeferred, err
	}
	head := c.head
	rec := judgement{Calls: calls}
	unjudgedFlag := false
	t := thresholds{retire: cfg.RetireConfidence, flag: cfg.FlagConfidence, clear: cfg.ClearConfidence}
	judgementID := fmt.Sprintf("conflict_resolver:%s/%d", it.memoryID, it.version)
	for i, p := range c.peers {
		var ans *peerJudgement
		if a, ok := answers[i]; ok {
			ans = &a
		}
		flagged := flaggedBetween(head, p.row)
		if ans == nil && flagged {
			unjudgedFlag = true
		}
		facts := pairFacts{policy: c.policy, anonymous: command.Anonymous(head.UserID), otherSession: p.row.SessionID != head.SessionID,
			peerFirst: p.asserted.Before(c.asserted), sameValidDay: sameValidDay(head, p.row), flagged: flagged}
		jp := judgedPair{Peer: p.row.MemoryID, Cosine: command.Round4(p.cosine), Action: fold(ans, facts, t)}
		if ans != nil {
			jp.Verdict, jp.Confidence = ans.Verdict, ans.Confidence
		}
		if jp.Action != actNone {
			done, err := s.actOn(ctx, head, p.row, jp, judgementID)
			switch {
			case errors.Is(err, errOrgErasing):
				return later(nil)
			case errors.Is(err, errNotActable):
				// A row revised meanwhile is left to its new mark.
			case err != nil && transientStore(err):
				// The keys are held past the lock's wait: the rest stays owed.
				return later(err)
			case err != nil:
				return later(err)
			}
			jp.Done = done
		}
		rec.Pairs = append(rec.Pairs, jp)
	}
	if unjudgedFlag && it.attempts < 2 {
		// A flag neither answer judged is judged again later, three times at most.
		s.giveBack(it, soon, true)
		return judgeRetry, nil
	}
	outcome := outcomeJudged
	if unjudgedFlag {
		outcome = outcomeErrored
	}
	return s.stamp(ctx, it, outcome, rec), nil
}

// askJudge makes the call: an answer with nothing usable, or with no verdict for some
// peer, is asked once more with twice the room, and the answer covering more peers is
// kept. It returns the usable entries by peer index and the calls made; an error of
// ClassMalformed means neither answer held anything usable.
func (s *Service) askJudge(ctx context.Context, bill llm.Bill, judged *memrow.Row, asserted time.Time, peers []clusterPeer) (map[int]peerJudgement, int, error) {
	room := 200 + 160*len(peers)
	msgs := judgePrompt(judged, asserted, peers)
	var best map[int]peerJudgement
	calls := 0
	for try := 0; try < 2; try++ {
		ans, err := s.models.Complete(ctx, llm.Request{Bill: bill, Messages: msgs, Schema: judgeSchema, MaxTokens: room, ReasoningEffort: "low"})
		c := llm.ClassOf(err)
		if err != nil && c != llm.ClassMalformed {
			if try > 0 && len(best) > 0 {
				break // keep the first answer's verdicts
			}
			return nil, calls, err
		}
		calls++
		// A malformed answer may still hold usable entries: read it leniently.
		if got := parseJudgements(ans.Content, peers); len(got) > len(best) {
			best = got
		}
		if len(best) == len(peers) {
			break
		}
		room *= 2
	}
	if len(best) == 0 {
		return nil, calls, &llm.Error{Class: llm.ClassMalformed, Purpose: llm.PurposeConflictResolver, Message: "no usable verdict in either answer"}
	}
	return best, calls, nil
}

// recheckCluster reads the judged row and its peers again, strongly, and keeps those
// still as judged: served, not pinned, not high, holding the same value. A judged row
// that changed ends the judgement (nil).
func (s *Service) recheckCluster(ctx context.Context, head *memrow.Row, peers []clusterPeer) (*memrow.Row, []clusterPeer, error) {
	ids := []string{head.MemoryID}
	for _, p := range peers {
		ids = append(ids, p.row.MemoryID)
	}
	rows, err := s.headsByID(ctx, head.Org, head.Namespace, ids)
	if err != nil {
		return nil, nil, err
	}
	now := s.now()
	byIdentity := map[memrow.Identity]*memrow.Row{}
	for _, r := range rows {
		byIdentity[r.Identity] = r
	}
	fresh := byIdentity[head.Identity]
	if fresh == nil || fresh.ContentSHA256 != head.ContentSHA256 || !fresh.Served(now) || fresh.Pinned {
		return nil, nil, nil
	}
	var kept []clusterPeer
	for _, p := range peers {
		r := byIdentity[p.row.Identity]
		if r == nil || r.ContentSHA256 != p.row.ContentSHA256 || !r.Served(now) || r.Pinned {
			continue
		}
		p.row = r
		kept = append(kept, p)
	}
	return fresh, kept, nil
}

// flaggedBetween reports whether either row's flags name the other.
func flaggedBetween(a, b *memrow.Row) bool {
	return containsString(a.ConflictWith, b.MemoryID) || containsString(b.ConflictWith, a.MemoryID)
}

// sameValidDay reports whether both writers dated their fact on the same day.
func sameValidDay(a, b *memrow.Row) bool {
	if a.ValidAt == nil || b.ValidAt == nil {
		return false
	}
	return a.ValidAt.UTC().Format(time.DateOnly) == b.ValidAt.UTC().Format(time.DateOnly)
}

func containsString(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func slicesFilter[T any](in []T, keep func(T) bool) []T {
	var out []T
	for _, x := range in {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// marshalDetail is a stamp's detail as stored.
func marshalDetail(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
