package searchindex

import "unsafe"

// postList is a term's value posting list in 16 bytes where a slice header takes 24: a
// namespace holds one for every term of its lexicon, and in a namespace of a few
// hundred memories most terms have a posting or two, so the headers were as much as
// the postings (about 150 bytes a memory at 300 memories).
type postList struct {
	first *posting // the array's first element; nil for no array
	n, c  uint32
}

func listOf(l []posting) postList {
	return postList{first: unsafe.SliceData(l), n: uint32(len(l)), c: uint32(cap(l))}
}

// slice is the list as a slice over its array, its spare capacity kept.
func (l postList) slice() []posting {
	if l.first == nil {
		return nil
	}
	return unsafe.Slice(l.first, l.c)[:l.n]
}
