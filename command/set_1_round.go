package command

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/internal/watermarks"
)

// Stage 1, the round (set.go lists the stages). A write of memory.set, memory.update,
// memory.update_by_id or memory.bulk_set is admitted in rounds: each reads the policy
// and the heads as they are now, decides (set_2_admit.go, set_3_judge.go), and commits
// (set_6_commit.go). A gap whose rows may be peers, a head that moved or a policy that
// moved sends the write to another round, up to LOOM_PG_ADMISSION_ROUNDS rounds within
// LOOM_PG_ADMISSION_DEADLINE_MS; then it answers 503 ADMISSION_CONTENDED
// (schemas/openapi.yaml, memory.set, "Admission").

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
	// judging is the namespace's calibrated thresholds (conflict_calibration.go).
	judging judgingCalibration
	// predicted: nothing was read; the key is taken to have no head under any
	// identity, which the commit checks under its lock (predictRound).
	predicted bool
}

// readRound reads a round's state. cachedPolicy lets it take the namespace's policy
// from the process's cache (policyCache) instead of reading it.
func (s *Service) readRound(ctx context.Context, org, ns string, keys, users, shas []string, cachedPolicy bool) (*roundState, error) {
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
	var unnamed heads.Unnamed
	// The keys by their references, computed here under the org's key rather than
	// in SQL (loom.key_refs unwrapped it on every round's read).
	keyRefs, err := s.keyRefs(ctx, org, keys)
	if err != nil {
		return nil, err
	}
	heads.QueueWithKeyRefs(b, s.kek, &unnamed, &byKey, org, ns, keyRefs)
	if len(shas) > 0 {
		heads.QueueWithContent(b, s.kek, &unnamed, &bySHA, org, ns, users, shas)
	}
	if !st.fromIndex {
		s.queueWatermark(b, org, ns, &st.capture)
	}
	s.queueJudgingCalibration(b, org, ns)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if err := unnamed.Name(ctx, s.pool); err != nil {
		return nil, err
	}
	st.judging = s.judgingOf(org, ns)
	if finish != nil {
		var err error
		if st.policy, err = finish(); err != nil {
			return nil, err
		}
		s.policies.put(org, ns, st.policy)
	}
	if st.policy.deleted {
		return nil, namespaceDeleted(ns)
	}
	for _, h := range byKey {
		st.keyHeads[h.MemoryKey] = append(st.keyHeads[h.MemoryKey], h)
	}
	for _, h := range bySHA {
		st.bySHA[h.ContentSHA256] = append(st.bySHA[h.ContentSHA256], h)
	}
	return st, nil
}

// keyRefs are keys' references in org (events.KeyRef) under every live user reference
// key of the org (the current one, made on the org's first write, and the retired one
// while a rotation runs): a head named under the retired key is still the key's, and
// the write revises it (set_retired_heads.go).
func (s *Service) keyRefs(ctx context.Context, org string, keys []string) ([]string, error) {
	live, err := s.userRefs.Live(ctx, org)
	if err != nil {
		return nil, err
	}
	refs := make([]string, 0, len(keys)*len(live))
	for _, g := range live {
		for _, k := range keys {
			ref, err := events.KeyRef(g.Key, k)
			if err != nil {
				return nil, fmt.Errorf("name the round's keys by reference: %w", err)
			}
			refs = append(refs, ref)
		}
	}
	return refs, nil
}

// queueWatermark queues a read of the serving projection's watermark of a namespace
// on b: every revision at or below it is in ClickHouse.
func (s *Service) queueWatermark(b *pgx.Batch, org, ns string, into *int64) {
	watermarks.QueueRead(b, s.cfg.Projection, org, ns, into)
}

// indexed reports whether the process's index serves the namespace's peer reads.
func (s *Service) indexed(org, ns string) bool {
	return s.index != nil && s.index.Held(searchindex.Space{Org: org, Namespace: ns})
}

// caughtUp waits, within LOOM_PG_ADMISSION_DEADLINE_MS, until the process's index
// holds the namespace's revisions up to seq. It reports false at once when the index
// does not serve the namespace's peer reads.
func (s *Service) caughtUp(ctx context.Context, org, ns string, seq int64) bool {
	if !s.indexed(org, ns) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AdmissionDeadline)
	defer cancel()
	return s.index.WaitFor(ctx, searchindex.Space{Org: org, Namespace: ns}, seq) == nil
}
