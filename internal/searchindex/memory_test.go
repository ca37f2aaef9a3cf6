package searchindex

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	benchcorpus "github.com/loomplane/loom/internal/corpus"
	"github.com/loomplane/loom/internal/embed"
)

// BenchmarkHeapPerMemory reports the Go heap the index holds per memory, for memories
// shaped as loomd bench writes them (ten made-up words, a unique key, one 384-dimension
// vector, one namespace), three ways: replayed and warm (Warm tidied it), with its
// graph built, and loaded from a checkpoint; and how fast the checkpoint writes and
// loads:
//
//	go test ./internal/searchindex -run '^$' -bench HeapPerMemory -benchtime 1x
func BenchmarkHeapPerMemory(b *testing.B) {
	const n = 100_000
	words := benchcorpus.Words
	for b.Loop() {
		rng := rand.New(rand.NewSource(1))
		heap := func() int64 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			return int64(m.HeapAlloc)
		}
		base := heap()
		x := New(Config{GraphMin: 20_000})
		x.Warming()
		for i := 0; i < n; i += 1000 {
			texts := make([]string, 1000)
			for j := range texts {
				w := make([]string, 10)
				for k := range w {
					w[k] = words[rng.Intn(len(words))]
				}
				texts[j] = strings.Join(w, " ")
			}
			vecs, _ := embed.NewHash(384).Embed(context.Background(), texts)
			recs := make([]Record, len(texts))
			for j := range recs {
				seq := int64(i + j + 1)
				recs[j] = Record{Seq: seq, Revision: &Revision{Seq: seq, MemoryID: uuid.NewString(), Version: seq, Agent: "-", UserID: "-",
					SessionID: "-", MemoryType: "fact", Status: "active", Sensitivity: "normal", ContentSHA256: shaOf(texts[j]), UpdatedAt: now,
					EmbeddingDim: 384, MemoryKey: fmt.Sprintf("k%07d", i+j), Text: texts[j], Vector: vecs[j]}}
			}
			x.Apply(ns, recs)
		}
		b.StopTimer()
		x.mu.RLock()
		s := x.spaces[ns]
		x.mu.RUnlock()
		s.mu.Lock()
		s.tidy()
		s.mu.Unlock()
		warm := heap() - base
		b.ReportMetric(float64(warm)/n, "heap-B/memory")
		b.ReportMetric(float64(x.Stats().Bytes)/n, "estimate-B/memory")
		x.Warm()
		x.Settle()
		b.ReportMetric(float64(heap()-base)/n, "heap-B/memory-with-graph")

		var buf bytes.Buffer
		b.StartTimer()
		start := time.Now()
		if err := x.WriteCheckpoint(&buf); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "checkpoint-write-ms")
		b.StopTimer()
		b.ReportMetric(float64(buf.Len())/n, "checkpoint-B/memory")
		x.Close()
		x = nil
		base = heap() - int64(buf.Cap())
		y := New(Config{})
		b.StartTimer()
		start = time.Now()
		if err := y.ReadCheckpoint(bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "checkpoint-load-ms")
		b.StopTimer()
		b.ReportMetric(float64(heap()-base-int64(buf.Cap()))/n, "loaded-heap-B/memory")
		runtime.KeepAlive(y)
		b.StartTimer()
	}
}
