package hnsw

import "math"

// Vectors are held as int8 codes with one float32 scale per vector (x ≈ scale·code):
// a quarter of float32's bytes. A query is quantised the same way to scan (an integer
// dot product, SIMD where the CPU has it), and the candidates a scan keeps are scored
// again against the float32 query (rescore), which halves the quantisation error.

// Quantise returns the int8 codes of v and the scale that restores it.
func Quantise(v []float32, codes []int8) float32 {
	var peak uint32 // the largest |x|: a non-negative float's bits order as it does
	for _, x := range v {
		peak = max(peak, math.Float32bits(x)&^(1<<31))
	}
	if peak == 0 {
		clear(codes)
		return 0
	}
	scale := math.Float32frombits(peak) / 127
	inv := 1 / scale
	for i, x := range v {
		codes[i] = roundCode(float64(x * inv))
	}
	return scale
}

// roundCode is math.Round(y) as an int8, for |y| <= 127, without its bit handling: y
// comes from a float32, so y ± 0.5 is exact in a float64 and truncating it rounds half
// away from zero as math.Round does.
func roundCode(y float64) int8 {
	return int8(y + math.Copysign(0.5, y)) // no branch: the signs of a vector are random
}

// Dot is the integer dot product of two code vectors of the same length.
func Dot(a, b []int8) int32 {
	if len(a) == 0 {
		return 0
	}
	return dotInt8(a, b[:len(a)])
}

// dotInt8Go is the portable kernel.
func dotInt8Go(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += int32(a[i]) * int32(b[i])
		s1 += int32(a[i+1]) * int32(b[i+1])
		s2 += int32(a[i+2]) * int32(b[i+2])
		s3 += int32(a[i+3]) * int32(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// DotFloat is the dot product of a float32 query with a code vector (the
// rescore): only the stored side carries quantisation error.
func DotFloat(q []float32, codes []int8) float32 {
	codes = codes[:len(q)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(q); i += 4 {
		s0 += q[i] * float32(codes[i])
		s1 += q[i+1] * float32(codes[i+1])
		s2 += q[i+2] * float32(codes[i+2])
		s3 += q[i+3] * float32(codes[i+3])
	}
	for ; i < len(q); i++ {
		s0 += q[i] * float32(codes[i])
	}
	return s0 + s1 + s2 + s3
}
