// Package scorebg is the search background's statistic: the median and spread of the
// relevance that the documents not answering a search get, read from a ranked list. Search reads it
// from a search's own pool (query/calibrate.go) and the recalibration pass from the
// namespace's vectors (workers/recalibration.go), so both record the same number in
// loom.search_calibration.
package scorebg

import (
	"math"
	"sort"
)

const (
	// From is the first rank (0-based) of a ranked list that is background: the ranks
	// before it may answer the query.
	From = 10
	// To is the rank the background ends before.
	To = 200
	// Min is the fewest background rows a statistic needs.
	Min = 20
)

// Of reads the background of scores (any order): the median and standard deviation
// of its ranks From..To-1 by score, best first, and how many rows that is; ok is
// false when fewer than Min rows lie past From.
func Of(scores []float64) (median, spread float64, rows int, ok bool) {
	desc := append([]float64(nil), scores...)
	sort.Sort(sort.Reverse(sort.Float64Slice(desc)))
	if len(desc) < From+Min {
		return 0, 0, 0, false
	}
	tail := desc[From:min(len(desc), To)]
	return tail[len(tail)/2], Stddev(tail), len(tail), true
}

// Stddev is the population standard deviation of xs (non-empty).
func Stddev(xs []float64) float64 {
	mean := 0.0
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	v := 0.0
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return math.Sqrt(v / float64(len(xs)))
}
