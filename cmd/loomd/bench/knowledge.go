package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"codeberg.org/go-pdf/fpdf"

	"github.com/loomplane/loom/client"
	kcommand "github.com/loomplane/loom/knowledge/command"
	"github.com/loomplane/loom/knowledge/parse"
)

// knowledgeJobFiles is how many documents one ingestion job of the scenario carries
// (its JSON stays under the server's default body limit).
const knowledgeJobFiles = 40

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
				"jobs submitted one after another; it includes the embedding of every chunk", knowledgeJobFiles)},
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
	start = time.Now()
	var st *client.IngestionStatus
	var ingested int
	for lo := 0; lo < len(files); lo += knowledgeJobFiles {
		docs := make([]client.DocumentInput, 0, knowledgeJobFiles)
		for _, f := range files[lo:min(lo+knowledgeJobFiles, len(files))] {
			docs = append(docs, client.DocumentInput{SourceURI: f.name, ContentBase64: base64.StdEncoding.EncodeToString(f.body)})
		}
		job, err := r.api.Ingest(ctx, ns, docs)
		if err != nil {
			return nil, fmt.Errorf("submit an ingestion job: %w", err)
		}
		for {
			if st, err = r.api.IngestStatus(ctx, ns, job.IngestionID); err != nil {
				return nil, fmt.Errorf("read the ingestion job: %w", err)
			}
			if st.Ended() {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if st.State != "completed" || st.Failed > 0 {
			return nil, fmt.Errorf("the ingestion job ended %s with %d failed files", st.State, st.Failed)
		}
		ingested += st.Chunks
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
	if _, err := r.settleIndex(ctx, mns); err != nil {
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
