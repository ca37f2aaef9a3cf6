package command

import (
	"context"
	"errors"
	"slices"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// The blacklist sweep (blacklist.add, and POST /v1/namespaces/{ns}/blacklist:sweep)
// tombstones the namespace's heads whose value a pattern matches: a pattern added
// after a leak must not leave the leaked rows searchable. It matches the heads the
// authority holds, a batch at a time in key order, with the RE2 match memory.set
// refuses a value by, so it reaches every committed row, the ones whose records Kafka
// has not taken (parked) among them; each match is a tombstone revision over the head
// it matched, whatever its lock or pin (a pattern is the namespace's policy, not a
// writer's change). Every read checks its rows against the heads, so a swept row is
// gone from search and lists once the sweep answers; the sweep then waits, within
// LOOM_BLACKLIST_SWEEP_WAIT_MS, for the serving projection to hold its tombstones, so
// ClickHouse's copies (history, the search documents) are retired too.

// SweepReport is what a sweep did.
type SweepReport struct {
	Patterns   []string `json:"patterns"`
	Matched    int64    `json:"matched"`    // heads a pattern matched
	Tombstoned int64    `json:"tombstoned"` // of them, tombstoned by this sweep
	Batches    int      `json:"batches"`
	// ProjectionPending: the serving projection had not applied every tombstone when
	// the wait ran out (reads drop the rows all the same).
	ProjectionPending bool `json:"projection_pending,omitempty"`
	// Error is why the sweep stopped after some tombstones landed: what it reports
	// landed, and a sweep run again takes the rest.
	Error string `json:"error,omitempty"`
}

// blacklistAnswer is blacklist.add's answer: the namespace's policy, and the sweep of
// the new pattern. A sweep that failed keeps the pattern and says why in sweep_error.
type blacklistAnswer struct {
	namespaceAnswer
	Sweep      *SweepReport `json:"sweep,omitempty"`
	SweepError string       `json:"sweep_error,omitempty"`
}

// sweepRequest is the optional body of POST .../blacklist:sweep: one listed pattern, or
// every pattern of the namespace when empty.
type sweepRequest struct {
	Pattern string `json:"pattern"`
}

// addAndSweep is blacklist.add: the pattern is added as a policy change, then swept.
func (s *Service) addAndSweep(ctx context.Context, p auth.Principal, ns, pattern string) (*blacklistAnswer, error) {
	pol, err := s.changeBlacklist(ctx, p, ns, pattern, addPattern)
	if err != nil {
		return nil, err
	}
	ans := &blacklistAnswer{namespaceAnswer: pol}
	report, err := s.sweepPatterns(ctx, p, ns, []string{pattern})
	switch {
	case err != nil:
		ans.SweepError = err.Error()
	case report.Error != "":
		ans.Sweep, ans.SweepError = report, report.Error
	default:
		ans.Sweep = report
	}
	return ans, nil
}

// sweep is POST .../blacklist:sweep.
func (s *Service) sweep(ctx context.Context, p auth.Principal, ns string, req sweepRequest) (*SweepReport, error) {
	pol, err := s.loadPolicy(ctx, s.pool, p.Org, ns)
	if err != nil {
		return nil, httperr.Store("reading the namespace policy", err)
	}
	var patterns []string
	for _, e := range pol.blacklist {
		if req.Pattern == "" || e.pattern == req.Pattern {
			patterns = append(patterns, e.pattern)
		}
	}
	if req.Pattern != "" && len(patterns) == 0 {
		return nil, httperr.NotFound("the namespace's blacklist does not hold that pattern")
	}
	return s.sweepPatterns(ctx, p, ns, patterns)
}

// sweepPatterns tombstones the heads the patterns match, records the outcome on each
// pattern's row, and answers it. It fails only while nothing landed.
func (s *Service) sweepPatterns(ctx context.Context, p auth.Principal, ns string, patterns []string) (*SweepReport, error) {
	pol, err := s.loadPolicy(ctx, s.pool, p.Org, ns)
	if err != nil {
		return nil, httperr.Store("reading the namespace policy", err)
	}
	pol.blacklist = slices.DeleteFunc(pol.blacklist, func(e blacklistEntry) bool { return !slices.Contains(patterns, e.pattern) })
	report := &SweepReport{Patterns: patterns}
	if report.Patterns == nil {
		report.Patterns = []string{}
	}
	matched := map[string]int64{}
	audit, err := s.startOp(ctx, p, "blacklist.sweep", ns, "", map[string]any{"patterns": report.Patterns})
	if err != nil {
		return nil, httperr.Store("auditing the sweep", err)
	}
	lastSeq, err := s.sweepHeads(ctx, p, ns, pol, report, matched)
	audit.finish(ctx, map[string]int64{"matched": report.Matched, "tombstoned": report.Tombstoned}, report.Batches, err)
	if err != nil {
		if report.Tombstoned == 0 {
			s.recordSweep(ctx, p.Org, ns, patterns, matched, err.Error())
			return nil, err
		}
		report.Error = err.Error()
	}
	if lastSeq > 0 && s.cfg.SweepWait > 0 {
		wctx, cancel := context.WithTimeout(ctx, s.cfg.SweepWait)
		_, werr := s.waitProjected(wctx, p.Org, map[string]int64{ns: lastSeq})
		cancel()
		report.ProjectionPending = werr != nil
	}
	s.recordSweep(ctx, p.Org, ns, patterns, matched, report.Error)
	return report, nil
}

// sweepHeads pages through the namespace's heads and tombstones the matches, a commit
// per page; it returns the seq of the last tombstone.
func (s *Service) sweepHeads(ctx context.Context, p auth.Principal, ns string, pol *policy, report *SweepReport, matched map[string]int64) (int64, error) {
	var after memrow.Identity
	var lastSeq int64
	for len(pol.blacklist) > 0 {
		page, err := s.headPage(ctx, p.Org, ns, after, s.cfg.RestoreBatchRows, true)
		if err != nil {
			return lastSeq, httperr.Store("reading the heads to sweep", err)
		}
		if len(page) == 0 {
			return lastSeq, nil
		}
		after = page[len(page)-1].Identity
		hits := sweepMatches(pol, page, matched)
		report.Matched += int64(len(hits))
		seq, n, err := s.tombstoneMatches(ctx, p, ns, pol, hits)
		report.Tombstoned += n
		if n > 0 {
			report.Batches++
			lastSeq = seq
		}
		if err != nil {
			return lastSeq, err
		}
	}
	return lastSeq, nil
}

// sweepMatches are the heads of a page a pattern matches; matched counts them by the
// first pattern that does.
func sweepMatches(pol *policy, page []*memrow.Row, matched map[string]int64) []*memrow.Row {
	var hits []*memrow.Row
	for _, h := range page {
		if h.Tombstone || h.Redacted {
			continue
		}
		if pat, hit := pol.blacklisted(memrow.ValueText(h.Value)); hit {
			hits = append(hits, h)
			if matched != nil {
				matched[pat]++
			}
		}
	}
	return hits
}

// tombstoneMatches commits a tombstone over each matched head, reading the heads again
// (and matching them again) when one moved under the commit.
func (s *Service) tombstoneMatches(ctx context.Context, p auth.Principal, ns string, pol *policy, hits []*memrow.Row) (lastSeq, n int64, err error) {
	for round := 0; len(hits) > 0; round++ {
		if round > 8 {
			return 0, 0, contended(errHeadMoved)
		}
		plan := &commitPlan{org: p.Org, namespace: ns, policyGeneration: -1}
		for _, h := range hits {
			row := copyOf(h)
			row.Tombstone, row.Actor = true, p.Actor()
			plan.rows = append(plan.rows, &pending{own: true, op: "blacklist.sweep", event: events.TypeTombstoned, row: row, readVersion: h.Version, readSeq: h.Seq})
		}
		err := s.commit(ctx, plan)
		if err == nil {
			// A commit whose answer was lost may have landed; the answer does not count it.
			if err := s.faults.afterCommit(); err != nil {
				return 0, 0, err
			}
			return plan.rows[len(plan.rows)-1].row.Seq, int64(len(plan.rows)), nil
		}
		if !errors.Is(err, errHeadMoved) && !errors.Is(err, errErased) {
			return 0, 0, commitError(err)
		}
		ids := make([]memrow.Identity, len(hits))
		for i, h := range hits {
			ids[i] = h.Identity
		}
		current, rerr := heads.Many(ctx, s.pool, p.Org, ns, ids)
		if rerr != nil {
			return 0, 0, httperr.Store("reading the heads to sweep", rerr)
		}
		var again []*memrow.Row
		for _, id := range ids {
			if h := current[heads.IdentityKey(id)]; h != nil {
				again = append(again, h)
			}
		}
		hits = sweepMatches(pol, again, nil)
	}
	return 0, 0, nil
}

// headPage reads up to n heads of the namespace after the identity after, in key
// order; liveOnly leaves out deleted heads.
func (s *Service) headPage(ctx context.Context, org, ns string, after memrow.Identity, n int, liveOnly bool) ([]*memrow.Row, error) {
	return heads.Page(ctx, s.pool, org, ns, after, n, liveOnly)
}

// recordSweep keeps each pattern's last sweep on its row: when, what it matched, and
// the error that stopped it.
func (s *Service) recordSweep(ctx context.Context, org, ns string, patterns []string, matched map[string]int64, sweepErr string) {
	for _, pat := range patterns {
		var e *string
		if sweepErr != "" {
			e = &sweepErr
		}
		if err := s.recordPatternSweep(context.WithoutCancel(ctx), org, ns, pat, matched[pat], e); err != nil {
			s.log.Warn("recording a blacklist sweep failed", "namespace", ns, "err", err)
			return
		}
	}
}
