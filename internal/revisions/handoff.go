package revisions

import (
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/ttlcache"
)

// Bounds of a Handoff: a follower further behind its relay than this reads the keys
// from Postgres, as without one.
const (
	handoffSize = 16384
	handoffTTL  = 10 * time.Second
)

// Handoff hands the data keys a process's relay just sealed revisions with to the
// process's index follower. Without it the follower reads each batch's keys back from
// Postgres (FetchKeys): a round trip on every record's way from its commit to
// searchable, and on a busy machine one of the two hops most of commit→searchable's
// tail is spent in (the other is the relay's own read; issue 35). A key is taken
// once, and one not taken expires after handoffTTL.
//
// A key taken for a revision redacted or erased after the relay read it is the key a
// FetchKeys run just before the destruction would have read: the redaction's or
// erasure's own record follows the revision's on its partition and removes the content
// when the follower applies it, and a barrier read waits for that. A revision the
// relay found already destroyed hands nothing over (outbox.Complete).
type Handoff struct {
	keys *ttlcache.Cache[string, []byte]
}

// NewHandoff returns an empty handoff.
func NewHandoff() *Handoff {
	return &Handoff{keys: ttlcache.New[string, []byte](handoffSize, handoffTTL)}
}

// Put hands over the data key of the revision with record id id; nil h keeps nothing.
func (h *Handoff) Put(id string, key []byte) {
	if h == nil || key == nil {
		return
	}
	h.keys.Add(id, key)
}

// Take removes and returns the keys handed over for revs, by record id, and the
// revisions whose keys were not: those are read with FetchKeys. nil h has none.
func (h *Handoff) Take(revs []*events.Envelope) (keys map[string][]byte, rest []*events.Envelope) {
	if h == nil {
		return nil, revs
	}
	for _, e := range revs {
		id := events.RecordID(e.Org, e.Namespace, e.Seq)
		key, ok := h.keys.Get(id)
		if !ok {
			rest = append(rest, e)
			continue
		}
		h.keys.Remove(id)
		if keys == nil {
			keys = make(map[string][]byte, len(revs))
		}
		keys[id] = key
	}
	return keys, rest
}
