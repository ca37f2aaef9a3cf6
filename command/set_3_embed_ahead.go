package command

import (
	"context"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/searchindex"
)

// The embedding call of a memory.set, started before the round's read (stage 3 of
// set.go, moved ahead when it can be). The round's read (one Postgres round trip) and
// a network embedder's call (one HTTP round trip) take about as long, and the call
// needs nothing the read answers when the request and the namespace's policy (as the
// process last read it) already say the value is embedded: then the two run at once
// and the write waits for the longer of them instead of both.
//
// What the read can still change: a request that names no memory_type takes its live
// head's, and a head of a non-searchable type (episodic, profile) is not embedded; a
// head may refuse the write (locked, pinned, a precondition, a proposal over a fact).
// Then the vectors are dropped, as if never asked for: no search document, no peer
// read, no embedding row. The value's own tier is decided before the read (the request
// and the detector alone, sensitivityOf), so a high-sensitivity value is never sent
// ahead, nor a value the namespace's blacklist or char limit refuses.
//
// Once the vectors are in, the call goes on to the write's peer read from the
// process's index and the heads of the peers in the verdict's reach, still beside the
// round's read. The first round takes that read when it is one the round would have
// made itself (peersAhead.covers): the index's position before it covers the round's
// capture, the type is the round's, and every doc the round's reach names has its
// head read. Else the round reads its peers as before.

// embedAhead is an embedding call under way for one write: texts and split as
// embedTexts gives them, and the call's answer once done is closed.
type embedAhead struct {
	split   func([][]float32)
	done    chan struct{}
	vectors [][]float32
	err     error
	peers   *peersAhead // nil: no peer read followed the call
}

// peersAhead is a peer read made ahead of the round: the index's docs nearest the value
// for memoryType, read once the index had applied every revision up to position, and
// the heads of those in reach as the read saw it (fetched, by heads.IdentityKey).
type peersAhead struct {
	memoryType string
	position   int64
	docs       []peerDoc
	fetched    map[string]bool
	current    map[string]*memrow.Row
}

// startEmbedAhead starts the write's embedding call when embedsAsRequested holds
// and the embedder is a network one (an in-process embedder answers in microseconds:
// nothing to overlap). It returns nil when it started none.
func (s *Service) startEmbedAhead(ctx context.Context, w *setWrite) *embedAhead {
	if !embed.Remote(s.embedder) || w.vector != nil {
		return nil
	}
	pol, ok := s.policies.get(w.id.Org, w.id.Namespace)
	if !ok || !embedsAsRequested(w, pol, s.cfg.CharLimit) {
		return nil
	}
	texts, split := embedTexts(w)
	a := &embedAhead{split: split, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		if a.vectors, a.err = s.embedder.Embed(ctx, texts); a.err == nil {
			a.peers = s.readPeersAhead(ctx, w, pol, a.vectors[0])
		}
	}()
	return a
}

// readPeersAhead reads the write's peers from the process's index, as its round would
// under the namespace's policy pol and the type the request names (else the default),
// with the heads of those in reach. nil when the index does not hold the namespace, the
// policy judges nothing, or a read failed: the round then reads its own.
func (s *Service) readPeersAhead(ctx context.Context, w *setWrite, pol *policy, vector []float32) *peersAhead {
	space := searchindex.Space{Org: w.id.Org, Namespace: w.id.Namespace}
	if s.index == nil || !s.index.Held(space) || pol.config.ConflictPolicy == PolicyAppendOnly {
		return nil
	}
	memoryType, _ := resolveType(w.req.MemoryType, nil, false, &pol.config)
	rules := s.rulesOf(&roundState{policy: pol, judging: s.judgingOf(w.id.Org, w.id.Namespace)})
	q := peerQuery{id: w.id, memoryType: memoryType, vector: vector, readUserID: w.p.ReadUserID, sha: w.sha}
	q.headsFrom = reach(rules.threshold(pol.config.typeConfig(memoryType)), rules.judgementFloor) - vectorMargin
	// Read before the docs: the position only moves up, so the docs cover it.
	p := &peersAhead{memoryType: memoryType, position: s.index.Position(space), fetched: map[string]bool{}}
	var err error
	if p.docs, err = s.indexPeers(q); err != nil {
		return nil
	}
	if p.current, err = s.peerHeads(ctx, q, p.docs); err != nil {
		return nil
	}
	for _, d := range p.docs {
		if !q.far(d) {
			p.fetched[heads.IdentityKey(d.id)] = true
		}
	}
	return p
}

// covers answers the read made ahead when it is the one the round's query q would make
// over the round's state st: from the index, at or past the round's capture (so the
// round's gap check, which starts after its capture, covers every revision the read
// did not see), of q's type, with the head of every doc in q's reach read.
func (p *peersAhead) covers(q peerQuery, st *roundState) ([]peerDoc, map[string]*memrow.Row, bool) {
	if p == nil || !st.fromIndex || p.position < st.capture || p.memoryType != q.memoryType {
		return nil, nil, false
	}
	for _, d := range p.docs {
		if !q.far(d) && !p.fetched[heads.IdentityKey(d.id)] {
			return nil, nil, false
		}
	}
	return p.docs, p.current, true
}

// embedsAsRequested reports whether a write's value is embedded as far as the request
// and the namespace's policy pol tell, before any head is read: a value of its own, of
// normal sensitivity, that the blacklist and the char limit let through, of a
// searchable type (the one the request names, else the default, after the policy's
// retype).
func embedsAsRequested(w *setWrite, pol *policy, charLimit int) bool {
	if pol.deleted || w.valueFromHead || w.requireHead || w.requireProposal || len(w.value) == 0 {
		return false
	}
	if sensitivity, _ := sensitivityOf(w); sensitivity == memrow.SensitivityHigh {
		return false
	}
	memoryType, _ := resolveType(w.req.MemoryType, nil, false, &pol.config)
	if memrow.NonSearchableTypes[memoryType] {
		return false
	}
	if limit := pol.config.typeConfig(memoryType).CharLimit; limit > 0 {
		charLimit = limit
	}
	if memrow.CheckCharLimit(w.value, charLimit) != nil {
		return false
	}
	_, hit := pol.blacklisted(w.valueText)
	return !hit
}

// take waits for the call and, when the write embeds its value after all, hands it the
// vectors (or the call's error); else it drops them.
func (a *embedAhead) take(embedded bool) error {
	<-a.done
	if !embedded {
		return nil
	}
	if a.err != nil {
		return a.err
	}
	a.split(a.vectors)
	return nil
}
