package index

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/embed"
)

// conversationHalf is one half of tests/quality/conversations.json: the turns of its
// dialogues, session by session, and its questions.
type conversationHalf struct {
	sessions  [][]string
	questions []string
}

func readConversations(t testing.TB, half string) conversationHalf {
	raw, err := os.ReadFile("../../tests/quality/conversations.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Dialogues []struct {
			Half     string `json:"half"`
			Sessions []struct {
				Turns []struct {
					Value string `json:"value"`
				} `json:"turns"`
			} `json:"sessions"`
		} `json:"dialogues"`
		Questions []struct {
			Half  string `json:"half"`
			Query string `json:"query"`
		} `json:"questions"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	var h conversationHalf
	for _, d := range file.Dialogues {
		if d.Half != half {
			continue
		}
		for _, s := range d.Sessions {
			var turns []string
			for _, tr := range s.Turns {
				turns = append(turns, tr.Value)
			}
			h.sessions = append(h.sessions, turns)
		}
	}
	for _, q := range file.Questions {
		if q.Half == half {
			h.questions = append(h.questions, q.Query)
		}
	}
	if len(h.sessions) == 0 || len(h.questions) == 0 {
		t.Fatalf("no %s half in conversations.json", half)
	}
	return h
}

// transcriptChunks is about n chunks of real conversation text: windows of 3 to 8
// consecutive turns of one session, cut at a random word at each end as a chunker's
// boundaries fall, so that no two are alike (a session's turns are few, and whole
// windows would repeat: an exact top 10 of copies no search could tell apart).
func transcriptChunks(h conversationHalf, n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]string, 0, n)
	for len(out) < n {
		s := h.sessions[rng.IntN(len(h.sessions))]
		from := rng.IntN(len(s))
		words := strings.Fields(strings.Join(s[from:min(from+3+rng.IntN(6), len(s))], "\n"))
		cut := rng.IntN(max(len(words)/4, 1))
		out = append(out, strings.Join(words[cut:len(words)-rng.IntN(max(len(words)/4, 1))], " "))
	}
	return out
}

// goSourceChunks is about n chunks of the Go distribution's own source (comments and
// code, paragraphs merged to 400 to 1,200 bytes), of the files whose path hashes to
// half: a real corpus of distinct text with topical clusters (its packages). queries are
// doc-comment sentences of some of those chunks, as a reader would ask.
func goSourceChunks(t testing.TB, half string, n int) (chunks, queries []string) {
	root := filepath.Join(runtime.GOROOT(), "src")
	var paths []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.Contains(p, "testdata") {
			if h := fnv.New32a(); true {
				h.Write([]byte(p))
				if (h.Sum32()%2 == 0) == (half == "tuning") {
					paths = append(paths, p)
				}
			}
		}
		return nil
	})
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var cur strings.Builder
		for _, para := range strings.Split(string(raw), "\n\n") {
			cur.WriteString(para)
			cur.WriteString("\n\n")
			if cur.Len() >= 400 {
				chunks = append(chunks, cur.String()[:min(cur.Len(), 1200)])
				cur.Reset()
			}
		}
		if len(chunks) >= n {
			break
		}
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for tries := 0; len(queries) < 112 && tries < 100000; tries++ {
		for _, line := range strings.Split(chunks[rng.IntN(len(chunks))], "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "//"))
			if len(strings.Fields(line)) >= 6 && !strings.ContainsAny(line, "{}();=") {
				queries = append(queries, line)
				break
			}
		}
	}
	if len(chunks) < n/2 || len(queries) < 50 {
		t.Fatalf("the Go source gave %d chunks and %d queries", len(chunks), len(queries))
	}
	return chunks, queries
}

// chunkOps indexes texts hash-embedded (the process's default embedder), in sources of
// 1 to 6 chunks.
func chunkOps(texts []string) []op {
	vecs, _ := embed.NewHash(384).Embed(context.Background(), texts)
	var ops []op
	for seq, i := int64(1), 0; i < len(texts); seq++ {
		uri := fmt.Sprintf("docs/%d.txt", seq)
		dc := &events.DocumentContent{SourceURI: uri, Title: uri}
		for k := 0; k < 1+int(seq%6) && i < len(texts); k, i = k+1, i+1 {
			dc.Chunks = append(dc.Chunks, events.DocumentChunk{Ordinal: k, Kind: "paragraph", Text: texts[i], Embedding: vecs[i]})
		}
		env := &events.Envelope{Type: events.TypeDocumentWritten, Seq: seq,
			Document: &events.Document{DocID: uri, Version: seq, Format: "text"}}
		ops = append(ops, op{org: "o", ns: "n", seq: seq, env: env, content: dc})
	}
	return ops
}

// scoreRecall is the share of want's top len(want) got answers counting a chunk whose
// score reaches want's last (a tie the exact order broke elsewhere) as found.
func scoreRecall(want, got []Candidate) float64 {
	if len(want) == 0 {
		return 1
	}
	n, floor := 0, want[len(want)-1].Vector
	for _, g := range got[:min(len(got), len(want))] {
		if g.Vector >= floor-1e-6 {
			n++
		}
	}
	return float64(n) / float64(len(want))
}

// BenchmarkRecallOnRealText measures, over chunks of real conversation text
// (tests/quality/conversations.json, each half apart) hash-embedded, recall@10 of the
// graph's vector leg and of the fused top 10 against the exact scan, the half's
// questions as queries, and the CPU per search of each.
func BenchmarkRecallOnRealText(b *testing.B) {
	for _, half := range []string{"tuning", "held_out"} {
		b.Run("corpus=transcripts/half="+half, func(b *testing.B) {
			h := readConversations(b, half)
			benchmarkRecall(b, transcriptChunks(h, recallChunks, 31), h.questions)
		})
		b.Run("corpus=go-source/half="+half, func(b *testing.B) {
			chunks, queries := goSourceChunks(b, half, recallChunks)
			benchmarkRecall(b, chunks, queries)
		})
	}
}

// recallChunks is how many chunks BenchmarkRecallOnRealText indexes: past the
// default LOOM_INDEX_GRAPH_MIN (20,000).
const recallChunks = 30000

func benchmarkRecall(b *testing.B, chunks, questions []string) {
	start := time.Now()
	ops := chunkOps(chunks)
	exact, graphed := New(Config{GraphMin: 1 << 30}), New(Config{GraphMin: 1, ExactMax: 1})
	defer graphed.Close()
	exact.apply(ops)
	graphed.apply(ops)
	graphed.Settle()
	b.Logf("%d sources indexed and graphed in %s", len(ops), time.Since(start).Round(time.Millisecond))
	qvecs, _ := embed.NewHash(384).Embed(context.Background(), questions)
	for _, ef := range []int{128, 512} {
		graphed.cfg.EfSearch = ef
		for _, impl := range []struct {
			name string
			x    *Index
		}{{"exact", exact}, {"graph", graphed}} {
			if impl.name == "exact" && ef != 128 {
				continue
			}
			b.Run(fmt.Sprintf("%s/ef=%d", impl.name, ef), func(b *testing.B) {
				start := cpuTime()
				i := 0
				for b.Loop() {
					impl.x.Search("o", "n", questions[i%len(questions)], qvecs[i%len(qvecs)], Filter{}, 20)
					i++
				}
				b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
				if impl.name == "graph" {
					var vr, sr, fr float64
					for q := range questions {
						want, got := exact.Search("o", "n", "", qvecs[q], Filter{}, 10), graphed.Search("o", "n", "", qvecs[q], Filter{}, 10)
						vr += recall(want, got)
						sr += scoreRecall(want, got)
						fr += recall(exact.Search("o", "n", questions[q], qvecs[q], Filter{}, 10), graphed.Search("o", "n", questions[q], qvecs[q], Filter{}, 10))
					}
					b.ReportMetric(vr/float64(len(questions)), "vector-recall@10")
					b.ReportMetric(sr/float64(len(questions)), "vector-score-recall@10")
					b.ReportMetric(fr/float64(len(questions)), "fused-recall@10")
				}
			})
		}
	}
}
