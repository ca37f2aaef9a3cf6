// Package gapless is the rule every follower of the revisions topic moves its position
// by. A namespace's seqs are its generations, so a position (the highest seq below which
// nothing is missing) tells a duplicate from a gap: the projector's watermarks and the
// in-process search index both advance by it.
package gapless

import "sort"

// Advance moves a position through a batch's seqs of one namespace: a seq at or below
// it is a duplicate; the next seq, or an erasure's seq (a jump), moves it. It reports
// whether a seq was left past a gap (seen, but not yet covered). A jump moves the
// position over any gap because the seqs below an erasure that have not arrived were
// withdrawn by it and never will.
func Advance(pos int64, seqs []int64, jumps map[int64]bool) (next int64, advanced, dupes int, gap bool) {
	s := append([]int64(nil), seqs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	for _, seq := range s {
		switch {
		case seq <= pos:
			dupes++
		case seq == pos+1 || jumps[seq]:
			pos = seq
			advanced++
		}
	}
	return pos, advanced, dupes, len(s) > 0 && s[len(s)-1] > pos
}
