package command

import (
	"context"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/memrow"
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

// embedAhead is an embedding call under way for one write: texts and split as
// embedTexts gives them, and the call's answer once done is closed.
type embedAhead struct {
	split   func([][]float32)
	done    chan struct{}
	vectors [][]float32
	err     error
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
		a.vectors, a.err = s.embedder.Embed(ctx, texts)
	}()
	return a
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
