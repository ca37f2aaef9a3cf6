package searchindex

import (
	"math/rand"
	"testing"
)

// The SIMD kernel agrees with the portable one at every length, extremes included.
func TestDotKernelsAgree(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for n := 0; n <= 400; n++ {
		a, b := make([]int8, n), make([]int8, n+3)
		for i := range a {
			a[i] = int8(rng.Intn(256) - 128)
		}
		for i := range b {
			b[i] = int8(rng.Intn(256) - 128)
		}
		if n%7 == 0 {
			for i := range a {
				a[i], b[i] = -128, -128
			}
		}
		if got, want := dotCodes(a, b), dotInt8Go(a, b[:n]); got != want {
			t.Fatalf("n=%d: kernel %d, portable %d", n, got, want)
		}
	}
}

// Quantised vectors keep the dot products of normalised vectors to about a thousandth.
func TestQuantisedDotIsClose(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	worst := 0.0
	for k := 0; k < 200; k++ {
		a, b := randomUnit(rng, 384), randomUnit(rng, 384)
		ca, cb := make([]int8, 384), make([]int8, 384)
		sa, sb := quantise(a, ca), quantise(b, cb)
		exact := float64(dotFloat(a, b))
		rescored := float64(sb * dotFloatCodes(a, cb))
		coded := float64(sa * sb * float32(dotCodes(ca, cb)))
		worst = max(worst, abs(rescored-exact), abs(coded-exact)/2)
	}
	if worst > 0.004 {
		t.Fatalf("quantised dot products are off by up to %.4f", worst)
	}
}

func randomUnit(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	var n float64
	for i := range v {
		v[i] = float32(rng.NormFloat64())
		n += float64(v[i] * v[i])
	}
	for i := range v {
		v[i] /= float32(sqrt(n))
	}
	return v
}
