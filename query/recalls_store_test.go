package query

import (
	"slices"
	"testing"
)

// A flush's arrays come in (org, namespace, memory) order, whatever order the counts
// were gathered in: two processes' flushes lock shared rows in one order.
func TestRecallColumnsAreInKeyOrder(t *testing.T) {
	pending := map[recallKey]int64{}
	for i, k := range []recallKey{
		{"b", "ns", "00000000-0000-0000-0000-000000000001"},
		{"a", "zz", "00000000-0000-0000-0000-000000000001"},
		{"a", "ns", "ffffffff-0000-0000-0000-000000000000"},
		{"a", "ns", "00000000-0000-0000-0000-00000000000a"},
		{"a", "ns", "00000000-0000-0000-0000-000000000002"},
	} {
		pending[k] = int64(i + 1)
	}
	for range 20 { // a map's order changes from one range to the next
		orgs, nss, ids, counts := recallColumns(pending)
		got := make([]string, len(ids))
		for i := range ids {
			got[i] = orgs[i] + "/" + nss[i] + "/" + ids[i]
			if counts[i] != pending[recallKey{orgs[i], nss[i], ids[i]}] {
				t.Fatalf("%s counted %d, want %d", got[i], counts[i], pending[recallKey{orgs[i], nss[i], ids[i]}])
			}
		}
		if !slices.IsSorted(got) || len(got) != len(pending) {
			t.Fatalf("the flush's rows in the order %v", got)
		}
	}
}
