package command

import (
	"errors"
	"sync"

	"github.com/loomplane/loom/internal/searchindex"
)

// A round without its read (stage 1, set_1_round.go). Most writes of memory.set name a
// key that has no head yet, in a namespace whose policy and calibration the process
// holds. Of such a write the round's one Postgres read (readRound) learns only that the
// key has no head, which the commit can check itself, in its first batch, under the
// namespace's generation lock (keyHeadsCheck, set_5_key_heads.go): every head is
// written under that lock, so what the check reads holds until the COMMIT. The round
// then runs on that prediction; a commit that finds a head of the key refuses it
// (errHeadMoved), and a round that would answer without committing (a refusal, a
// merge) answers nothing: either way the round runs again on the heads it reads.

// errUnpredicted: a round on predicted heads reached an answer its commit did not
// check; the round runs again on the heads it reads.
var errUnpredicted = errors.New("a round on predicted heads answered without a commit")

// predictRound is the state a write's first round runs on without reading Postgres,
// or nil when it reads: it must be a plain memory.set (no Idempotency-Key, no dry
// run), of a namespace whose peers the process's index serves, whose policy and
// calibration the process holds, and of a key neither the index nor the process's
// recent commits know a head of.
func (s *Service) predictRound(w *setWrite, gapFrom int64) *roundState {
	if gapFrom >= 0 || w.readHeads || w.op != "memory.set" || w.hold != nil || w.req.DryRun || w.requireHead || w.requireProposal {
		return nil
	}
	org, ns := w.id.Org, w.id.Namespace
	sp := searchindex.Space{Org: org, Namespace: ns}
	if !s.indexed(org, ns) || !s.judgingHeld(org, ns) {
		return nil
	}
	// The capture first, as readRound: the position only moves up, so it covers the
	// peer reads.
	capture := s.index.Position(sp)
	pol, ok := s.policies.get(org, ns)
	if !ok || pol.deleted || s.index.HoldsKey(sp, w.id.MemoryKey) || s.recent.has(org, ns, w.id.MemoryKey) {
		return nil
	}
	return &roundState{policy: pol, policyCached: true, keyHeads: nil, capture: capture, fromIndex: true,
		judging: s.judgingOf(org, ns), predicted: true}
}

// recentKeys are the keys this process committed last, of any namespace: the index
// applies a commit a moment after it answers, and a key revised in that moment has a
// head the index does not show yet.
type recentKeys struct {
	mu   sync.Mutex
	ring [recentKeysSize]string
	next int
	held map[string]int // how many times each is in ring
}

const recentKeysSize = 1024

func newRecentKeys() *recentKeys { return &recentKeys{held: map[string]int{}} }

func recentKey(org, ns, key string) string { return org + "\x00" + ns + "\x00" + key }

// add remembers a committed key, forgetting the oldest.
func (r *recentKeys) add(org, ns, key string) {
	if r == nil {
		return
	}
	k := recentKey(org, ns, key)
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.ring[r.next]; old != "" {
		if r.held[old]--; r.held[old] == 0 {
			delete(r.held, old)
		}
	}
	r.ring[r.next] = k
	r.held[k]++
	r.next = (r.next + 1) % recentKeysSize
}

// has reports whether the process committed the key among its last commits.
func (r *recentKeys) has(org, ns, key string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[recentKey(org, ns, key)] > 0
}
