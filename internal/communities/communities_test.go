package communities

import "testing"

// Two groups joined by nothing are two communities, each named by one of its own
// members, and a weak link between two dense groups does not merge them; the answer is
// the same whatever order the edges come in.
func TestPropagateFindsTheGraphsClusters(t *testing.T) {
	edges := []Edge{
		{"alice", "acme", 3}, {"acme", "berlin", 2}, {"alice", "berlin", 2},
		{"bob", "globex", 4}, {"globex", "paris", 3}, {"bob", "paris", 3},
		{"berlin", "paris", 1},
		{"carol", "initech", 1},
	}
	got := Propagate(edges)
	rev := make([]Edge, len(edges))
	for i, e := range edges {
		rev[len(edges)-1-i] = e
	}
	again := Propagate(rev)
	for n, l := range got {
		if again[n] != l {
			t.Fatalf("%s: %s, then %s in another order", n, l, again[n])
		}
	}
	same := func(a, b string) bool { return got[a] == got[b] }
	if !same("alice", "acme") || !same("acme", "berlin") || !same("bob", "globex") || !same("globex", "paris") || !same("carol", "initech") {
		t.Fatalf("a group split: %v", got)
	}
	if same("alice", "bob") || same("alice", "carol") || same("bob", "carol") {
		t.Fatalf("groups merged: %v", got)
	}
}
