package projector

import "testing"

// A batch folds the run of seqs that continues the watermark, a replay's run from its
// start, and nothing past a gap.
func TestFoldRange(t *testing.T) {
	for _, c := range []struct {
		seqs     []int64
		mark     int64
		from, to int64
		ok       bool
	}{
		{[]int64{11, 12, 13}, 10, 11, 13, true},
		{[]int64{13, 12, 11, 12}, 10, 11, 13, true},  // out of order, a copy twice
		{[]int64{8, 9, 10, 11, 12}, 10, 8, 12, true}, // a redelivery running into new seqs
		{[]int64{5, 6, 11, 12}, 10, 11, 12, true},    // the run that advances, not the old one
		{[]int64{1, 2, 3}, 40, 1, 3, true},           // a replay from the start
		{[]int64{13, 14}, 10, 0, 0, false},           // past a gap: left for the redelivery
		{[]int64{11, 12, 14, 15}, 10, 11, 12, true},  // stops at the gap
		{[]int64{3, 4}, 1, 0, 0, false},
	} {
		from, to, ok := foldRange(c.seqs, c.mark)
		if from != c.from || to != c.to || ok != c.ok {
			t.Errorf("foldRange(%v, %d) = %d, %d, %v; want %d, %d, %v", c.seqs, c.mark, from, to, ok, c.from, c.to, c.ok)
		}
	}
}
