package revisions

import (
	"bytes"
	"testing"

	"github.com/loomplane/loom/events"
)

// The follower takes the keys its relay handed over, each once, and reads the rest
// from Postgres; without a handoff it reads them all.
func TestTheFollowerTakesHandedKeysOnceAndReadsTheRest(t *testing.T) {
	env := func(seq int64) *events.Envelope { return &events.Envelope{Org: "acme", Namespace: "notes", Seq: seq} }
	revs := []*events.Envelope{env(1), env(2), env(3)}
	h := NewHandoff()
	h.Put(events.RecordID("acme", "notes", 1), []byte("key one"))
	h.Put(events.RecordID("acme", "notes", 3), []byte("key three"))
	h.Put(events.RecordID("acme", "notes", 2), nil) // a redacted revision's record: nothing handed over
	keys, rest := h.Take(revs)
	if len(keys) != 2 || !bytes.Equal(keys[events.RecordID("acme", "notes", 1)], []byte("key one")) ||
		!bytes.Equal(keys[events.RecordID("acme", "notes", 3)], []byte("key three")) {
		t.Errorf("taken keys %q", keys)
	}
	if len(rest) != 1 || rest[0].Seq != 2 {
		t.Errorf("left to read from Postgres: %+v, want seq 2", rest)
	}
	if keys, rest := h.Take(revs); len(keys) != 0 || len(rest) != 3 {
		t.Errorf("a key was taken twice: %q", keys)
	}
	var none *Handoff
	none.Put("acme/notes/4", []byte("k"))
	if keys, rest := none.Take(revs); keys != nil || len(rest) != 3 {
		t.Errorf("no handoff took %q", keys)
	}
}
