package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"codeberg.org/go-pdf/fpdf"
	"golang.org/x/sync/errgroup"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/generations"
	kcommand "github.com/loomplane/loom/knowledge/command"
	"github.com/loomplane/loom/knowledge/parse"
)

// knowledgeJobFiles is how many documents one ingestion job of the scenario carries
// (its JSON, about 0.6 MiB, stays under the server's default body limit of 8 MiB), and
// knowledgeJobsInFlight how many jobs it keeps submitted at once: the workers role runs
// a process's jobs one after another, so a job waiting behind the running one keeps it
// busy where a client that waits for each job's end before it submits the next leaves it
// idle for a submission, a claim and a status poll per job.
const (
	knowledgeJobFiles     = 200
	knowledgeJobsInFlight = 3
)

// knowledge measures knowledge.ingest end to end (the job committed, run by the
// workers role: each file parsed, chunked, embedded and committed as an upsert under
// the job's fence) in MB/s and chunks/s against the bare parse and chunking of the
// same files in this process, same run; then knowledge.search over the corpus against
// memory.search over a namespace of as many memories as the corpus has chunks, and a
// document's commit→searchable against a memory's.
func (r *runner) knowledge(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title: fmt.Sprintf("knowledge.ingest throughput, knowledge.search latency and commit→searchable, %d documents", r.opts.KnowledgeDocs),
		Baseline: "ingest: the bare parse and chunking of the same files in this process (knowledge/parse), same run; search: memory.search of the same queries over as many memories as the corpus has chunks; " +
			"commit→searchable: a memory's (memory.set until memory.search finds it) in that namespace",
		Notes: []string{"the corpus is generated: text, Markdown, HTML, CSV and PDF (written with fpdf, two pages each) in equal parts, a few KiB each",
			fmt.Sprintf("ingest is timed from the first submission to the last job's completed status, %d documents a job, "+
				"%d jobs in flight (the workers role runs them one after another); it includes the embedding of every chunk", knowledgeJobFiles, knowledgeJobsInFlight)},
	}
	type file struct {
		name string
		body []byte
	}
	files := make([]file, r.opts.KnowledgeDocs)
	var total int64
	for i := range files {
		var err error
		if files[i], err = r.knowledgeFile(i); err != nil {
			return nil, err
		}
		total += int64(len(files[i].body))
	}
	// The baseline: parse and chunk every file here, as the write side does.
	start := time.Now()
	chunks := 0
	for _, f := range files {
		doc, err := parse.Parse(ctx, f.name, "", f.body, parse.DefaultLimits())
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", f.name, err)
		}
		chunks += len(parse.Chunks(doc, parse.ChunkOptions{MaxTokens: kcommand.ChunkTokens, OverlapTokens: kcommand.ChunkOverlap}))
	}
	parseSecs := time.Since(start).Seconds()

	ns := r.namespace("knowledge")
	r.progress("  ingesting %d documents (%.2f MiB, %d chunks parsed in %.1fs)", len(files), float64(total)/(1<<20), chunks, parseSecs)
	bodies := make([][2]string, len(files))
	for i, f := range files {
		bodies[i] = [2]string{f.name, base64.StdEncoding.EncodeToString(f.body)}
	}
	start = time.Now()
	ingested, err := r.ingestJobs(ctx, ns, bodies)
	if err != nil {
		return nil, err
	}
	ingestSecs := time.Since(start).Seconds()
	r.progress("  ingested %d chunks in %.1fs", ingested, ingestSecs)
	mb := float64(total) / (1 << 20)
	res.add(fmt.Sprintf("%d documents, %.2f MiB", len(files), mb), "MB/s", round(mb/ingestSecs, 3), round(mb/parseSecs, 3))
	res.add(fmt.Sprintf("%d documents, %d chunks", len(files), ingested), "chunks/s", round(float64(ingested)/ingestSecs, 1),
		round(float64(chunks)/parseSecs, 1))

	if err := r.knowledgeSearch(ctx, res, ns, ingested); err != nil {
		return nil, err
	}
	return res, nil
}

// ingestJobs ingests files (name, base64 body) in jobs of knowledgeJobFiles, keeping
// knowledgeJobsInFlight of them submitted, and answers how many chunks they wrote once
// every job completed; a job that ends otherwise, or with a failed file, is an error.
func (r *runner) ingestJobs(ctx context.Context, ns string, files [][2]string) (int, error) {
	var (
		next, ingested atomic.Int64
		said           atomic.Int64
	)
	g, gctx := errgroup.WithContext(ctx)
	for range knowledgeJobsInFlight {
		g.Go(func() error {
			for {
				lo := int(next.Add(knowledgeJobFiles)) - knowledgeJobFiles
				if lo >= len(files) {
					return nil
				}
				docs := make([]client.DocumentInput, 0, knowledgeJobFiles)
				for _, f := range files[lo:min(lo+knowledgeJobFiles, len(files))] {
					docs = append(docs, client.DocumentInput{SourceURI: f[0], ContentBase64: f[1]})
				}
				st, err := r.ingestJob(gctx, ns, docs)
				if err != nil {
					return err
				}
				n := ingested.Add(int64(st.Chunks))
				if now := time.Now().Unix(); now-said.Load() >= 5 {
					said.Store(now)
					r.progress("    the job of documents %d..%d of %d completed; %d chunks ingested so far", lo, min(lo+knowledgeJobFiles, len(files))-1, len(files), n)
				}
			}
		})
	}
	err := g.Wait()
	return int(ingested.Load()), err
}

// ingestJob submits one ingestion job and polls its status until it ends.
func (r *runner) ingestJob(ctx context.Context, ns string, docs []client.DocumentInput) (*client.IngestionStatus, error) {
	job, err := r.api.Ingest(ctx, ns, docs)
	if err != nil {
		return nil, fmt.Errorf("submit an ingestion job: %w", err)
	}
	for {
		st, err := r.api.IngestStatus(ctx, ns, job.IngestionID)
		if err != nil {
			return nil, fmt.Errorf("read the ingestion job: %w", err)
		}
		if st.Ended() {
			if st.State != "completed" || st.Failed > 0 {
				return nil, fmt.Errorf("the ingestion job ended %s with %d failed files", st.State, st.Failed)
			}
			return st, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// knowledgeSearch measures knowledge.search over the ingested namespace beside
// memory.search over as many memories as it holds chunks, then commit→searchable in
// each.
func (r *runner) knowledgeSearch(ctx context.Context, res *ScenarioResult, ns string, ingested int) error {
	// knowledge.search vs memory.search at the same size.
	mns := r.namespace("knowledge", "memories")
	if err := r.appendOnly(ctx, mns); err != nil {
		return err
	}
	if _, err := r.loadValues(ctx, mns, ingested); err != nil {
		return err
	}
	st, err := r.settleIndex(ctx, mns)
	if err != nil {
		return err
	}
	if st.Vectors > 0 {
		res.Rows = append(res.Rows, plainRow(fmt.Sprintf("memory.search's baseline, %d memories", st.Vectors),
			"of the vectors, in the HNSW graph (the rest scanned exactly)", float64(st.Graph)))
	}
	if err := r.settleKnowledgeIndex(ctx, res, ns); err != nil {
		return err
	}
	queries := make([]string, queryPool)
	for i := range queries {
		queries[i] = strings.Join(strings.Fields(sentence(r.rng))[:4], " ")
	}
	if a, err := r.api.SearchKnowledge(ctx, ns, client.KnowledgeSearchRequest{Query: queries[0], Limit: 10}); err != nil || len(a.Hits) == 0 {
		return fmt.Errorf("a warm-up knowledge.search found nothing (%v): the scenario would measure empty answers", err)
	}
	for _, conc := range r.levels(1, 5) {
		name := fmt.Sprintf("%d chunks, concurrency=%d", ingested, conc)
		rands := r.workerRands(conc)
		loom, err := r.closedLoop(ctx, "knowledge.search "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
			_, err := r.api.SearchKnowledge(ctx, ns, client.KnowledgeSearchRequest{Query: queries[rands[w].IntN(len(queries))], Limit: 10})
			return err
		})
		if err != nil {
			return err
		}
		base, err := r.closedLoop(ctx, "memory.search "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
			_, err := r.api.Search(ctx, mns, client.SearchRequest{Query: queries[rands[w].IntN(len(queries))], TopK: 10})
			return err
		})
		if err != nil {
			return err
		}
		res.compare(name, loom, base, "calls/s")
	}
	return r.knowledgeLag(ctx, res, ns, mns, ingested)
}

// settleKnowledgeIndex waits until the process's chunk index has applied everything ns
// committed and finished its graph builds, and records how many of its vectors the
// graph holds: the search figures are then the built graph's (past
// LOOM_INDEX_GRAPH_MIN vectors), as memory search's are.
func (r *runner) settleKnowledgeIndex(ctx context.Context, res *ScenarioResult, ns string) error {
	x := r.t.Process.KnowledgeIndex
	if x == nil {
		return nil
	}
	start := time.Now()
	gen, err := generations.Read(ctx, r.t.Process.PG, r.t.Org, ns)
	if err != nil {
		return fmt.Errorf("read the generation of %s: %w", ns, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := x.WaitFor(wctx, r.t.Org, ns, gen); err != nil {
		return fmt.Errorf("wait for the knowledge index to apply %s through seq %d: %w", ns, gen, err)
	}
	x.Settle()
	vectors, nodes := x.Graphed(r.t.Org, ns)
	r.progress("    knowledge index settled in %s: %d vectors, %d graph nodes", time.Since(start).Round(100*time.Millisecond), vectors, nodes)
	res.Rows = append(res.Rows, plainRow(fmt.Sprintf("knowledge.search, %d chunk vectors", vectors),
		"of the vectors, in the HNSW graph (the rest scanned exactly)", float64(nodes)))
	return nil
}

// knowledgeFile is the corpus's i-th document: its name says its format.
func (r *runner) knowledgeFile(i int) (f struct {
	name string
	body []byte
}, err error) {
	var b strings.Builder
	switch i % 5 {
	case 0:
		f.name = fmt.Sprintf("corpus/notes-%03d.txt", i)
		for p := 0; p < 12; p++ {
			fmt.Fprintf(&b, "%s %s %s\n\n", sentence(r.rng), sentence(r.rng), sentence(r.rng))
		}
	case 1:
		f.name = fmt.Sprintf("corpus/guide-%03d.md", i)
		for p := 0; p < 6; p++ {
			fmt.Fprintf(&b, "## %s\n\n%s %s\n\n- %s\n- %s\n\n", strings.Join(strings.Fields(sentence(r.rng))[:3], " "),
				sentence(r.rng), sentence(r.rng), sentence(r.rng), sentence(r.rng))
		}
	case 2:
		f.name = fmt.Sprintf("corpus/page-%03d.html", i)
		b.WriteString("<html><head><title>page</title></head><body>")
		for p := 0; p < 6; p++ {
			fmt.Fprintf(&b, "<h2>%s</h2><p>%s %s</p><ul><li>%s</li></ul>", strings.Join(strings.Fields(sentence(r.rng))[:3], " "),
				sentence(r.rng), sentence(r.rng), sentence(r.rng))
		}
		b.WriteString("</body></html>")
	case 4:
		f.name = fmt.Sprintf("corpus/report-%03d.pdf", i)
		f.body, err = r.knowledgePDF()
		return f, err
	default:
		f.name = fmt.Sprintf("corpus/table-%03d.csv", i)
		b.WriteString("id,name,notes\n")
		for row := 0; row < 40; row++ {
			w := strings.Fields(sentence(r.rng))
			fmt.Fprintf(&b, "%d,%s,%s\n", row, w[0], strings.Join(w[1:6], " "))
		}
	}
	f.body = []byte(b.String())
	return f, nil
}

// knowledgePDF is a two-page PDF of generated sentences, written with fpdf (the
// library the parser's tests write theirs with).
func (r *runner) knowledgePDF() ([]byte, error) {
	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.SetTitle("report", true)
	pdf.SetFont("Helvetica", "", 11)
	for page := 0; page < 2; page++ {
		pdf.AddPage()
		for l := 0; l < 12; l++ {
			pdf.Cell(0, 6, sentence(r.rng))
			pdf.Ln(6)
		}
	}
	var buf bytes.Buffer
	if err := pdf.Output(&buf); err != nil {
		return nil, fmt.Errorf("write the corpus's PDF: %w", err)
	}
	return buf.Bytes(), nil
}
