package hnsw

import (
	"math"
	"math/rand"
	"testing"
)

// A code rounds as math.Round does, halves and the extremes included: a checkpoint
// holds codes, and a query must be quantised as the rows were.
func TestCodesRoundAsMathRound(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	check := func(x, inv float32) {
		y := float64(x * inv)
		if got, want := roundCode(y), int8(math.Round(y)); got != want {
			t.Fatalf("roundCode(%v) = %d, math.Round %d", y, got, want)
		}
	}
	for i := -254; i <= 254; i++ {
		check(float32(i)/2, 1) // every half between -127 and 127
		check(math.Nextafter32(float32(i)/2, 0), 1)
	}
	for range 1_000_000 {
		v := rng.Float32()*2 - 1
		check(v, 127/max(float32(math.Abs(float64(v))), rng.Float32()))
	}
}

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
		if got, want := Dot(a, b), dotInt8Go(a, b[:n]); got != want {
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
		sa, sb := Quantise(a, ca), Quantise(b, cb)
		exact := float64(dotFloat(a, b))
		rescored := float64(sb * DotFloat(a, cb))
		coded := float64(sa * sb * float32(Dot(ca, cb)))
		worst = max(worst, abs(rescored-exact), abs(coded-exact)/2)
	}
	if worst > 0.004 {
		t.Fatalf("quantised dot products are off by up to %.4f", worst)
	}
}

func dotFloat(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func abs(x float64) float64 { return math.Abs(x) }

func randomUnit(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	var n float64
	for i := range v {
		v[i] = float32(rng.NormFloat64())
		n += float64(v[i] * v[i])
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(n))
	}
	return v
}

func BenchmarkQuantise(b *testing.B) {
	v := make([]float32, 384)
	for i := range v {
		v[i] = float32(math.Sin(float64(i)))
	}
	codes := make([]int8, len(v))
	for b.Loop() {
		Quantise(v, codes)
	}
}
