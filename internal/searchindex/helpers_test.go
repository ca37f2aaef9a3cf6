package searchindex

import "math"

func dotFloat(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func abs(x float64) float64  { return math.Abs(x) }
func sqrt(x float64) float64 { return math.Sqrt(x) }
