package projector

import "testing"

// A batch folds the run of seqs that continues the watermark, a replay's run from its
// start, and nothing past a gap but an erasure's jump over the seqs it withdrew.
func TestFoldRange(t *testing.T) {
	for _, c := range []struct {
		seqs     []int64
		mark     int64
		from, to int64
		ok       bool
		jumps    map[int64]bool
	}{
		{[]int64{11, 12, 13}, 10, 11, 13, true, nil},
		{[]int64{13, 12, 11, 12}, 10, 11, 13, true, nil},  // out of order, a copy twice
		{[]int64{8, 9, 10, 11, 12}, 10, 8, 12, true, nil}, // a redelivery running into new seqs
		{[]int64{5, 6, 11, 12}, 10, 11, 12, true, nil},    // the run that advances, not the old one
		{[]int64{1, 2, 3}, 40, 1, 3, true, nil},           // a replay from the start
		{[]int64{13, 14}, 10, 0, 0, false, nil},           // past a gap: left for the redelivery
		{[]int64{11, 12, 14, 15}, 10, 11, 12, true, nil},  // stops at the gap
		{[]int64{3, 4}, 1, 0, 0, false, nil},
		{[]int64{16, 17, 18}, 10, 16, 18, true, map[int64]bool{16: true}},     // an erasure withdrew 11..15
		{[]int64{11, 12, 16, 17}, 10, 11, 17, true, map[int64]bool{16: true}}, // the jump joins the run before it
		{[]int64{17, 18}, 10, 0, 0, false, map[int64]bool{16: true}},          // the jump itself has not arrived
	} {
		from, to, ok := foldRange(c.seqs, c.mark, c.jumps)
		if from != c.from || to != c.to || ok != c.ok {
			t.Errorf("foldRange(%v, %d) = %d, %d, %v; want %d, %d, %v", c.seqs, c.mark, from, to, ok, c.from, c.to, c.ok)
		}
	}
}
