package e2e

import (
	"testing"
)

// A key written again against the same conflicting peer keeps the pair flagged on both
// sides, and the peer, already conflicted and listing the key, gets no new version: a
// copy of it would change nothing.
func TestAKeyWrittenAgainstItsFlaggedPeerLeavesThePeersVersion(t *testing.T) {
	e := newPhaseEnv(t, nil)
	first := e.ok("k1", map[string]any{"value": "the user lives in Lisbon"})
	a := e.ok("k2", map[string]any{"value": "the user lives in Berlin"})
	eq(t, "verdict", a["verdict"], any("conflict"))
	_, before := e.head("k1")
	eq(t, "peer status", before["status"], any("conflicted"))
	revisions := e.revisions("k1")
	// A search passes the generation barrier: the index holds both keys before the next
	// write captures it. A write whose capture missed them finds them in its gap, and
	// the round after, judging what it measured there, copies its peers as before.
	e.hitKeys("the user lives in Berlin")

	again := e.ok("k2", map[string]any{"value": "the user lives in Madrid"})
	eq(t, "verdict", again["verdict"], any("conflict"))
	if cw, _ := again["conflict_with"].([]any); len(cw) != 1 || cw[0] != first["memory_id"] {
		t.Fatalf("conflict_with %v", again["conflict_with"])
	}
	_, after := e.head("k1")
	eq(t, "peer status", after["status"], any("conflicted"))
	if cw, _ := after["conflict_with"].([]any); len(cw) != 1 || cw[0] != a["memory_id"] {
		t.Fatalf("peer conflict_with %v", after["conflict_with"])
	}
	eq(t, "peer version", after["version"], before["version"])
	if n := e.revisions("k1"); n != revisions {
		t.Fatalf("k1 has %d revisions after k2 was written again, %d before", n, revisions)
	}
	if ev := e.events(); !sameList(ev, "memory.written", "memory.written", "memory.status_changed", "memory.revised") {
		t.Fatalf("events %v", ev)
	}
}
