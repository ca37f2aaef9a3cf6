package searchindex

import (
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/hnsw"
)

// Benchmarks of the index at the sizes the issue names, each beside the bare exact scan
// of the same vectors (float32, no filter, no index: the machine's limit):
//
//	go test ./internal/searchindex -run '^$' -bench . -benchtime 2000x
//
// A search is one namespace's four legs (vector, chunk, lexical, key) over the served
// filter with a leg pool of 200, as memory.search asks of each namespace.

var corpora sync.Map // size → *benchCorpus

type benchCorpus struct {
	revs    []*Revision
	queries []Query
	exact   *Index
	once    sync.Once
	graphed *Index
}

// graph returns the corpus in an index with its graph built.
func (c *benchCorpus) graph(b *testing.B) *Index {
	c.once.Do(func() {
		c.graphed = New(Config{GraphMin: 1 << 30})
		for i := 0; i < len(c.revs); i += 5000 {
			c.graphed.Apply(ns, records(c.revs[i:min(i+5000, len(c.revs))]))
		}
		start := time.Now()
		c.graphed.cfg.GraphMin = 1
		c.graphed.Apply(ns, nil)
		c.graphed.Settle()
		b.Logf("%d documents: graph built in %s", len(c.revs), time.Since(start).Round(time.Millisecond))
	})
	return c.graphed
}

func benchData(b *testing.B, n int) *benchCorpus {
	if c, ok := corpora.Load(n); ok {
		return c.(*benchCorpus)
	}
	c := &benchCorpus{revs: corpus(n, 7)}
	rng := rand.New(rand.NewSource(5))
	for i := 0; i < 256; i++ {
		q := sentence(rng)
		c.queries = append(c.queries, Query{Filter: served(), Vector: queryVector(q), Text: q, Terms: terms(q), Limit: 200, K1: 1.2, B: 0.75})
	}
	c.exact = New(Config{GraphMin: 1 << 30})
	for i := 0; i < n; i += 5000 {
		c.exact.Apply(ns, records(c.revs[i:min(i+5000, n)]))
	}
	corpora.Store(n, c)
	return c
}

// run issues b.N searches from c goroutines and reports throughput and latency.
func run(b *testing.B, c int, search func(i int)) {
	lat := make([]time.Duration, b.N)
	var next sync.Mutex
	i := 0
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				n := i
				i++
				next.Unlock()
				if n >= b.N {
					return
				}
				t := time.Now()
				search(n)
				lat[n] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "searches/s")
	b.ReportMetric(float64(lat[b.N/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[b.N*99/100].Microseconds())/1000, "p99-ms")
}

func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		for _, c := range []int{1, 5} {
			if testing.Short() && n > 10000 {
				continue
			}
			b.Run(fmt.Sprintf("n=%d/c=%d/exact", n, c), func(b *testing.B) {
				d := benchData(b, n)
				run(b, c, func(i int) { d.exact.Search(ns, d.queries[i%len(d.queries)]) })
			})
			b.Run(fmt.Sprintf("n=%d/c=%d/graph", n, c), func(b *testing.B) {
				d := benchData(b, n)
				g := d.graph(b)
				run(b, c, func(i int) { g.Search(ns, d.queries[i%len(d.queries)]) })
			})
			b.Run(fmt.Sprintf("n=%d/c=%d/bare-scan", n, c), func(b *testing.B) {
				d := benchData(b, n)
				m := bareMatrix(d.revs)
				run(b, c, func(i int) { bareScan(m, d.queries[i%len(d.queries)].Vector, 200) })
			})
		}
	}
}

// bareMatrix is the corpus's float32 vectors, contiguous.
func bareMatrix(revs []*Revision) [][]float32 {
	m := make([][]float32, len(revs))
	for i, r := range revs {
		m[i] = r.Vector
	}
	return m
}

// bareScan is the plain exact scan: a float32 dot with every vector and the best k kept.
func bareScan(m [][]float32, q []float32, k int) []hnsw.Cand {
	top := hnsw.NewTopK(k)
	for i, v := range m {
		top.Offer(uint32(i), dotFloat32(q, v))
	}
	return top.Kept()
}

func dotFloat32(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// BenchmarkPeers is memory.set's peer read (top 16 of a type under other keys).
func BenchmarkPeers(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		for _, mode := range []string{"exact", "graph"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, mode), func(b *testing.B) {
				d := benchData(b, n)
				x := d.exact
				if mode == "graph" {
					x = d.graph(b)
				}
				run(b, 1, func(i int) {
					q := d.queries[i%len(d.queries)]
					x.Peers(ns, PeerQuery{MemoryType: "fact", MemoryKey: "k", Vector: q.Vector, Limit: 16, Now: now})
				})
			})
		}
	}
}

// BenchmarkApply applies the corpus in batches of 1000 records to an empty index and
// reports records/s and the bytes held per memory, without a graph and with one.
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			d := benchData(b, n)
			recs := records(d.revs)
			b.ResetTimer()
			var x *Index
			for i := 0; i < b.N; i++ {
				x = New(Config{GraphMin: 1 << 30})
				for j := 0; j < n; j += 1000 {
					x.Apply(ns, recs[j:min(j+1000, n)])
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(x.Stats().Bytes)/float64(n), "bytes/memory")
			b.ReportMetric(float64(d.graph(b).Stats().Bytes)/float64(n), "bytes/memory-graphed")
		})
	}
}

// BenchmarkRevise applies revisions of random documents of a loaded namespace, each
// with another document's text: the postings of an older document go back into
// their lists' slot order.
func BenchmarkRevise(b *testing.B) {
	x, recs := revisedIndex(b, 100000, func(r, other *Revision) {
		r.Text, r.ContentSHA256, r.Vector = other.Text, other.ContentSHA256, other.Vector
	})
	applyRevisions(b, x, recs, 100)
}

// BenchmarkCopies applies copies of random documents of a 10,000-document namespace
// (conflict marks: the same text and tags, a new version and status, no vector), in
// batches of 5, as a conflict's commit writes them.
//
//	go test ./internal/searchindex -run '^$' -bench BenchmarkCopies -benchtime 50000x
func BenchmarkCopies(b *testing.B) {
	x, recs := revisedIndex(b, 10000, func(r, _ *Revision) { r.Status, r.Vector = "conflicted", nil })
	b.ReportAllocs()
	applyRevisions(b, x, recs, 5)
}

// revisedIndex loads a namespace of n documents and makes b.N revisions of random
// ones, at the next seqs, each changed by change (other: another random document).
func revisedIndex(b *testing.B, n int, change func(r, other *Revision)) (*Index, []Record) {
	d := benchData(b, n)
	x := New(Config{GraphMin: 1 << 30})
	for j := 0; j < n; j += 5000 {
		x.Apply(ns, records(d.revs[j:min(j+5000, n)]))
	}
	rng := rand.New(rand.NewSource(3))
	seq := int64(n)
	recs := make([]Record, b.N)
	for i := range recs {
		seq++
		r := *d.revs[rng.Intn(n)]
		r.Seq, r.Version = seq, seq
		change(&r, d.revs[rng.Intn(n)])
		recs[i] = Record{Seq: seq, Revision: &r}
	}
	return x, recs
}

// applyRevisions times applying recs to x in batches of size.
func applyRevisions(b *testing.B, x *Index, recs []Record, size int) {
	b.ResetTimer()
	for i := 0; i < len(recs); i += size {
		x.Apply(ns, recs[i:min(i+size, len(recs))])
	}
	b.ReportMetric(float64(len(recs))/b.Elapsed().Seconds(), "records/s")
}
