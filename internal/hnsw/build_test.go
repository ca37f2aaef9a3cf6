package hnsw

import (
	"math/rand"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkWakeDuringBuild measures how late a goroutine of the same process runs
// once its timer fires while a graph build holds the only P (GOMAXPROCS 1, as a
// loaded machine leaves a process): the foreground work a build delays, an ingest's
// next step or a search. It reports the wake-up delay's p50 and p99 in ms.
func BenchmarkWakeDuringBuild(b *testing.B) {
	const dim, rows = 384, 4000
	rng := rand.New(rand.NewSource(1))
	src := Source{Dim: dim, Codes: make([]int8, rows*dim), Scales: make([]float32, rows), Limit: rows}
	for r := range rows {
		src.Scales[r] = Quantise(randomUnit(rng, dim), src.Codes[r*dim:(r+1)*dim])
		src.Rows = append(src.Rows, int32(r))
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var delays []time.Duration
	for b.Loop() {
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				asked := time.Now()
				time.Sleep(time.Millisecond)
				delays = append(delays, time.Since(asked)-time.Millisecond)
			}
		}()
		Build(src, Params{M: DefaultM, EfConstruction: DefaultEfConstruction, Seed: 1}, func() bool { return false })
		close(done)
		wg.Wait()
	}
	slices.Sort(delays)
	if len(delays) > 0 {
		b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50-wake-ms")
		b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "p99-wake-ms")
		b.ReportMetric(float64(len(delays))/float64(b.N), "wakes/build")
	}
}

// BenchmarkBuild builds a graph of 20,000 random unit vectors of 384 dimensions, the
// size at which an index first builds one (LOOM_INDEX_GRAPH_MIN), and reports the
// build's time a node.
func BenchmarkBuild(b *testing.B) {
	const dim, rows = 384, 20000
	rng := rand.New(rand.NewSource(1))
	src := Source{Dim: dim, Codes: make([]int8, rows*dim), Scales: make([]float32, rows), Limit: rows}
	for r := range rows {
		src.Scales[r] = Quantise(randomUnit(rng, dim), src.Codes[r*dim:(r+1)*dim])
		src.Rows = append(src.Rows, int32(r))
	}
	start := time.Now()
	for b.Loop() {
		Build(src, Params{M: DefaultM, EfConstruction: DefaultEfConstruction, Seed: 1}, func() bool { return false })
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N*rows), "µs/node")
}
