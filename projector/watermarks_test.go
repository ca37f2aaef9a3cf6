package projector

import "testing"

func TestAdvance(t *testing.T) {
	cases := []struct {
		name           string
		wm             int64
		seqs           []int64
		jumps          map[int64]bool
		want           int64
		advanced, dups int
		gap            bool
	}{
		{"contiguous", 4, []int64{6, 5, 7}, nil, 7, 3, 0, false},
		{"duplicates", 4, []int64{3, 4, 5}, nil, 5, 1, 2, false},
		{"a gap holds the watermark", 4, []int64{6, 7}, nil, 4, 0, 0, true},
		{"an erasure jumps the seqs it withdrew", 4, []int64{6, 7, 9, 10}, map[int64]bool{9: true}, 10, 2, 0, false},
		{"an erasure alone", 4, []int64{9}, map[int64]bool{9: true}, 9, 1, 0, false},
		{"past the erasure, a new gap", 4, []int64{9, 11}, map[int64]bool{9: true}, 9, 1, 0, true},
		{"an erasure already covered", 12, []int64{9}, map[int64]bool{9: true}, 12, 0, 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wm, adv, dups, gap := advance(c.wm, c.seqs, c.jumps)
			if wm != c.want || adv != c.advanced || dups != c.dups || gap != c.gap {
				t.Fatalf("advance(%d, %v, %v) = %d, %d advanced, %d duplicates, gap %t; want %d, %d, %d, %t",
					c.wm, c.seqs, c.jumps, wm, adv, dups, gap, c.want, c.advanced, c.dups, c.gap)
			}
		})
	}
}
