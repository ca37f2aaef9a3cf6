package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/text"
)

// corpus is a synthetic namespace: sources of a few chunks, words drawn from a skewed
// vocabulary (so some postings hold most chunks and lexical scores tie often), unit
// vectors of dim entries, some repeated (vector ties) and some missing.
type corpus struct {
	rng   *rand.Rand
	words []string
	dim   int
}

func newCorpus(seed uint64, dim int) *corpus {
	c := &corpus{rng: rand.New(rand.NewPCG(seed, 1)), dim: dim}
	const letters = "bcdfghjklmnprtvz"
	for i := 0; i < 3000; i++ {
		w := []byte{'q'}
		for n := i; ; n /= len(letters) {
			w = append(w, letters[n%len(letters)], 'o')
			if n < len(letters) {
				break
			}
		}
		c.words = append(c.words, string(w))
	}
	return c
}

// word draws a word, the first ones far more often than the rest.
func (c *corpus) word() string {
	return c.words[int(float64(len(c.words))*math.Pow(c.rng.Float64(), 3))]
}

func (c *corpus) phrase(n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = c.word()
	}
	return strings.Join(ws, " ")
}

func (c *corpus) vector() []float32 {
	v := make([]float32, c.dim)
	var norm float64
	for i := range v {
		v[i] = float32(c.rng.NormFloat64())
		norm += float64(v[i]) * float64(v[i])
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(norm))
	}
	return v
}

// document is a write of uri at version with chunks chunks.
func (c *corpus) document(seq, version int64, uri string, chunks int, last []float32) op {
	formats := []string{"text", "markdown", "pdf"}
	tags := [][]string{nil, {"policy"}, {"policy", "hr"}}
	dc := &events.DocumentContent{SourceURI: uri, Title: uri, Tags: tags[c.rng.IntN(len(tags))]}
	for i := 0; i < chunks; i++ {
		var vec []float32
		switch r := c.rng.IntN(50); {
		case r == 0:
		case r == 1 && last != nil:
			vec = last
		default:
			vec = c.vector()
		}
		last = vec
		dc.Chunks = append(dc.Chunks, events.DocumentChunk{Ordinal: i, Kind: "paragraph", Text: c.phrase(5 + c.rng.IntN(40)), Embedding: vec})
	}
	env := &events.Envelope{Type: events.TypeDocumentWritten, Seq: seq,
		Document: &events.Document{DocID: uri, Version: version, Format: formats[c.rng.IntN(len(formats))]}}
	return op{org: "o", ns: "n", seq: seq, env: env, content: dc}
}

// build indexes about chunks chunks, in sources of 1 to 7.
func (c *corpus) build(chunks int) *Index {
	x := New(Config{})
	x.apply(c.ops(chunks))
	return x
}

// ops writes about chunks chunks, in sources of 1 to 7.
func (c *corpus) ops(chunks int) []op {
	var ops []op
	seq := int64(0)
	for n := 0; n < chunks; {
		seq++
		k := 1 + c.rng.IntN(7)
		ops = append(ops, c.document(seq, seq, sourceURI(seq), k, nil))
		n += k
	}
	return ops
}

func TestSearchAnswersAsTheFullSortDid(t *testing.T) {
	c := newCorpus(31, 16)
	x := c.build(4000)
	// churn: new versions (their old chunks stay in the postings until compacted),
	// deletions and a restore
	var churn []op
	seq := x.Position("o", "n")
	for i := int64(1); i <= 300; i += 3 {
		seq++
		churn = append(churn, c.document(seq, seq+10000, sourceURI(i), 1+c.rng.IntN(5), nil))
	}
	for i := int64(2); i <= 200; i += 7 {
		seq++
		churn = append(churn, flip(seq, sourceURI(i), events.TypeDocumentDeleted))
	}
	seq++
	churn = append(churn, flip(seq, sourceURI(9), events.TypeDocumentRestored))
	x.apply(churn)
	if checked := matchesTheFullSort(t, c, x); checked < 1000 {
		t.Fatalf("only %d candidates compared: the corpus does not exercise the search", checked)
	}
}

// Rewriting every source twice leaves most slots dropped: the space renumbers its
// chunks and rewrites its postings, and searches answer as before.
func TestSearchAnswersAsTheFullSortAfterTheSlotsAreRenumbered(t *testing.T) {
	c := newCorpus(32, 16)
	x := c.build(3000)
	seq := x.Position("o", "n")
	written := seq
	churn, seq := c.rewriteTwice(seq, written, func(int64) bool { return true })
	x.apply(churn)
	renumberedAndMatchingTheFullSort(t, c, x)
}

// rewriteTwice writes a new version of each source 1..written that rewrite keeps,
// twice over, from the seq after seq; it answers the writes and the last seq drawn.
func (c *corpus) rewriteTwice(seq, written int64, rewrite func(source int64) bool) ([]op, int64) {
	var churn []op
	for range 2 {
		for i := int64(1); i <= written; i++ {
			if rewrite(i) {
				seq++
				churn = append(churn, c.document(seq, seq+10000, sourceURI(i), 1+c.rng.IntN(7), nil))
			}
		}
	}
	return churn, seq
}

// renumberedAndMatchingTheFullSort checks that churn renumbered the space's slots
// and that Search still answers as the full sort does.
func renumberedAndMatchingTheFullSort(t *testing.T, c *corpus, x *Index) {
	t.Helper()
	s := x.spaces[[2]string{"o", "n"}]
	if len(s.slots) >= 2*s.chunks {
		t.Fatalf("%d slots for %d chunks: never renumbered", len(s.slots), s.chunks)
	}
	if checked := matchesTheFullSort(t, c, x); checked < 1000 {
		t.Fatalf("only %d candidates compared: the corpus does not exercise the search", checked)
	}
}

// matchesTheFullSort compares Search with the full sort over 60 queries, filtered and
// not, at four depths, and answers how many candidates it compared.
func matchesTheFullSort(t *testing.T, c *corpus, x *Index) int {
	t.Helper()
	filters := []Filter{{}, {SourcePrefix: "src/3/"}, {Formats: []string{"text", "pdf"}}, {Tags: []string{"policy"}}}
	checked := 0
	for q := 0; q < 60; q++ {
		query := c.phrase(1 + c.rng.IntN(4))
		if q%10 == 0 {
			query = c.words[0] + " " + c.words[1] // postings of most chunks
		}
		var vec []float32
		if q%3 != 0 {
			vec = c.vector()
		}
		f := filters[q%len(filters)]
		for _, depth := range []int{1, 10, 40, 300} {
			want := x.referenceSearch("o", "n", query, vec, f, depth)
			got := x.Search("o", "n", query, vec, f, depth)
			if len(got) != len(want) {
				t.Fatalf("%q vec=%v %+v depth %d: %d candidates, the full sort %d", query, vec != nil, f, depth, len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.Chunk != w.Chunk || g.Score != w.Score || g.Lexical != w.Lexical || g.Vector != w.Vector {
					t.Fatalf("%q vec=%v %+v depth %d, #%d: %s#%d %v/%v/%v, the full sort %s#%d %v/%v/%v", query, vec != nil, f, depth, i,
						g.SourceURI, g.Ordinal, g.Score, g.Lexical, g.Vector, w.SourceURI, w.Ordinal, w.Score, w.Lexical, w.Vector)
				}
			}
			checked += len(want)
		}
	}
	return checked
}

// sourceURI is the URI of the source first written at seq.
func sourceURI(seq int64) string { return fmt.Sprintf("src/%d/%d.txt", seq%10, seq) }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSearch compares, at 20k and 100k chunks of 384-dimension vectors (the hash
// embedder's size), a two-term query with its vector at knowledge.search's default pool
// depth: the full sort Search replaced (reference), Search scanning every vector
// (exact: a namespace below GraphMin), and Search walking the HNSW graph (graph: past
// GraphMin, which the default puts at 20,000 vectors). The graph's runs report its
// recall@10 against the exact scan, of the vector leg alone (a query with no terms)
// and of the fused top 20.
func BenchmarkSearch(b *testing.B) {
	for _, size := range []int{20000, 100000} {
		c := newCorpus(7, 384)
		ops := c.ops(size)
		exact, graphed := New(Config{GraphMin: 1 << 30}), New(Config{GraphMin: 1, ExactMax: 1})
		exact.apply(ops)
		graphed.apply(ops)
		start := time.Now()
		graphed.Settle()
		b.Logf("%d chunks: graph built in %s", size, time.Since(start).Round(time.Millisecond))
		query, vec := c.phrase(2), c.vector()
		for _, impl := range []struct {
			name   string
			search func(org, ns, query string, vec []float32, f Filter, depth int) []Candidate
		}{{"reference", exact.referenceSearch}, {"exact", exact.Search}, {"graph", graphed.Search}} {
			b.Run(fmt.Sprintf("chunks=%d/%s", size, impl.name), func(b *testing.B) {
				b.ReportAllocs()
				start := cpuTime()
				for b.Loop() {
					impl.search("o", "n", query, vec, Filter{}, 20)
				}
				// the process's CPU time: on a shared, loaded machine steadier than ns/op's wall clock
				b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
				if impl.name == "graph" {
					b.ReportMetric(recallAt10(c, exact, graphed, ""), "vector-recall@10")
					b.ReportMetric(recallAt10(c, exact, graphed, "terms"), "fused-recall@10")
				}
			})
		}
		graphed.Close()
	}
}

// recallAt10 is the share of the exact index's top 10 the graphed one answers, over 100
// queries: vector alone, or with a two-term query fused ("terms").
func recallAt10(c *corpus, exact, graphed *Index, mode string) float64 {
	held := 0
	for range 100 {
		query, vec := "", c.vector()
		if mode == "terms" {
			query = c.phrase(2)
		}
		type at struct {
			uri     string
			ordinal int
		}
		want := map[at]bool{}
		for _, w := range exact.Search("o", "n", query, vec, Filter{}, 10) {
			want[at{w.SourceURI, w.Ordinal}] = true
		}
		for _, g := range graphed.Search("o", "n", query, vec, Filter{}, 10) {
			if want[at{g.SourceURI, g.Ordinal}] {
				held++
			}
		}
	}
	return float64(held) / 1000
}

// BenchmarkLexicalLeg is the lexical leg alone at 100k chunks: four-word queries of
// the skewed vocabulary (the first words in most chunks, as the generated corpus of
// `loomd bench --scenario knowledge` has few words), no vector, at knowledge.search's
// default pool depth.
func BenchmarkLexicalLeg(b *testing.B) {
	c := newCorpus(7, 16)
	x := New(Config{GraphMin: 1 << 30})
	x.apply(c.ops(100000))
	queries := make([]string, 64)
	postings := 0
	s := x.spaces[[2]string{"o", "n"}]
	for i := range queries {
		queries[i] = c.phrase(4)
		for _, t := range text.Terms(queries[i]) {
			postings += s.df[t]
		}
	}
	b.ReportAllocs()
	start, i := cpuTime(), 0
	for b.Loop() {
		x.Search("o", "n", queries[i%len(queries)], nil, Filter{}, 20)
		i++
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(postings)/float64(len(queries)), "postings/query")
}
