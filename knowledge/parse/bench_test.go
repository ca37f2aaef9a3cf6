package parse_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loomplane/loom/knowledge/parse"
)

// corpus builds a document of about size bytes in each format, from the same
// prose and table, so MB/s compares the formats' readers.
func corpus(b *testing.B, size int) map[string][]byte {
	b.Helper()
	para := func(i int) string {
		return fmt.Sprintf("Paragraph %d explains how the service keeps its promises: every write commits once, "+
			"the relay publishes it, and the readers see it in order. Retries are safe; limits are stated.", i)
	}
	var text, md, html, csv strings.Builder
	html.WriteString("<html><head><title>Bench</title></head><body>")
	csv.WriteString("id,city,qty,note\n")
	var rows [][]any
	rows = append(rows, []any{"id", "city", "qty", "note"})
	var pages [][]string
	for i := 0; text.Len() < size; i++ {
		p := para(i)
		text.WriteString(p + "\n\n")
		if i%10 == 0 {
			md.WriteString(fmt.Sprintf("## Section %d\n\n", i))
			html.WriteString(fmt.Sprintf("<h2>Section %d</h2>", i))
		}
		md.WriteString(p + "\n\n- a point\n- another point\n\n")
		html.WriteString("<p>" + p + "</p><ul><li>a point</li><li>another point</li></ul>")
		fmt.Fprintf(&csv, "%d,Oslo,%d,\"%s\"\n", i, i%7, p[:60])
		rows = append(rows, []any{i, "Oslo", i % 7, p[:60]})
		if i%20 == 0 {
			pages = append(pages, nil)
		}
		// a PDF page line is about 90 characters
		for j := 0; j < len(p); j += 90 {
			pages[len(pages)-1] = append(pages[len(pages)-1], p[j:min(len(p), j+90)])
		}
	}
	html.WriteString("</body></html>")
	return map[string][]byte{
		"text": []byte(text.String()), "markdown": []byte(md.String()), "html": []byte(html.String()),
		"csv": []byte(csv.String()), "pdf": makePDF(b, "bench", pages...),
		"xlsx": makeXLSX(b, []string{"S"}, map[string][][]any{"S": rows}),
	}
}

var benchNames = map[string]string{"text": "b.txt", "markdown": "b.md", "html": "b.html", "csv": "b.csv", "pdf": "b.pdf", "xlsx": "b.xlsx"}

// BenchmarkParse: MB/s of Parse per format over a document of ~1 MB of text (MB/s
// counts the bytes uploaded, compressed for the XLSX and the PDF; text-MB/s the
// text the blocks hold).
func BenchmarkParse(b *testing.B) {
	docs := corpus(b, 1<<20)
	for _, format := range []string{"text", "markdown", "html", "pdf", "csv", "xlsx"} {
		body := docs[format]
		b.Run(format, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			text := 0
			for b.Loop() {
				doc, err := parse.Parse(context.Background(), benchNames[format], "", body, parse.DefaultLimits())
				if err != nil {
					b.Fatal(err)
				}
				text = 0
				for _, blk := range doc.Blocks {
					text += len(blk.Text)
				}
			}
			// The text it yields, per second: the compressed formats' MB/s count
			// fewer bytes for the same text.
			b.ReportMetric(float64(text)*float64(b.N)/b.Elapsed().Seconds()/1e6, "text-MB/s")
		})
	}
}

// BenchmarkChunks: MB/s of Chunks over the parsed documents' text.
func BenchmarkChunks(b *testing.B) {
	docs := corpus(b, 1<<20)
	for _, format := range []string{"markdown", "csv"} {
		doc, err := parse.Parse(context.Background(), benchNames[format], "", docs[format], parse.DefaultLimits())
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, blk := range doc.Blocks {
			n += len(blk.Text)
		}
		b.Run(format, func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				parse.Chunks(doc, parse.DefaultChunkOptions())
			}
		})
	}
}
