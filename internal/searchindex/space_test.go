package searchindex

import (
	"fmt"
	"testing"
)

// The interner numbers each name once, from 1, finds every name it numbered through
// its growth, and none it did not.
func TestInternerNumbersEachNameOnce(t *testing.T) {
	n := newInterner()
	if _, ok := n.lookup("x"); ok {
		t.Fatal("an empty interner found a name")
	}
	for i := 0; i < 5000; i++ {
		if id := n.id(fmt.Sprintf("name-%d", i)); id != uint32(i+1) {
			t.Fatalf("name %d numbered %d", i, id)
		}
	}
	for i := 0; i < 5000; i++ {
		if id, ok := n.lookup(fmt.Sprintf("name-%d", i)); !ok || id != uint32(i+1) {
			t.Fatalf("name %d: %d %v", i, id, ok)
		}
		if id := n.id(fmt.Sprintf("name-%d", i)); id != uint32(i+1) {
			t.Fatalf("name %d renumbered %d", i, id)
		}
	}
	for _, s := range []string{"", "name-5000", "name--1", "Name-1"} {
		if _, ok := n.lookup(s); ok {
			t.Fatalf("found %q, never numbered", s)
		}
	}
	if id := n.id(""); id != 5001 {
		t.Fatalf(`"" numbered %d: it is a name like any other once given`, id)
	}
	if len(n.table) > 4*n.count() || 4*n.count() > 3*len(n.table)+4 {
		t.Fatalf("table of %d cells for %d names", len(n.table), n.count())
	}
}
