package parse_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/loomplane/loom/knowledge/parse"
	"github.com/loomplane/loom/knowledge/parse/parsetest"
)

// block is what a test expects of a block: kind, heading path (joined by " > ") and
// text.
type block struct{ kind, path, text string }

func blocksOf(doc *parse.Document) []block {
	var out []block
	for _, b := range doc.Blocks {
		out = append(out, block{b.Kind, strings.Join(b.HeadingPath, " > "), b.Text})
	}
	return out
}

func mustParse(t *testing.T, name, contentType string, body []byte) *parse.Document {
	t.Helper()
	doc, err := parse.Parse(context.Background(), name, contentType, body, parse.DefaultLimits())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return doc
}

func checkBlocks(t *testing.T, name string, doc *parse.Document, want []block) {
	t.Helper()
	if got := blocksOf(doc); !slices.Equal(got, want) {
		t.Errorf("%s blocks:\n got %q\nwant %q", name, got, want)
	}
}

func TestEachFormatReadsToItsBlocks(t *testing.T) {
	injection := `'; DROP TABLE loom.knowledge_heads; --`
	md := "# Handbook\n\nWelcome to **the** handbook.\r\nSecond line.\n\n## Install\n\n- get it\n- run it\n  - twice\n\n" +
		"```sh\nmake  build\n```\n\n| name | note |\n|---|---|\n| a | " + injection + " |\n| b |  |\n\n# FAQ\n\nAsk   away.\n"
	html := `<!doctype html><html><head><title>The page</title><style>p{color:red}</style></head><body>
<script>alert("no")</script><h1>Top</h1><p>Hello,
   <b>world</b>!<br>Next line.</p>loose <i>text</i><h2>Sub</h2><ol><li>one<ul><li>inner</li></ul></li><li>two</li></ol>
<pre>  keep
    this</pre><table><caption>People</caption><thead><tr><th>who</th><th>age</th></tr></thead>
<tbody><tr><td>Ann</td><td>41</td></tr><tr><td>` + "&lt;script&gt;" + `</td><td>7</td></tr></tbody></table></body></html>`
	csvBody := "id,name,joined\n1,Ann,2024-01-02\n2,\"Bo, Jr.\",2024-02-03\n3," + `"` + strings.ReplaceAll(injection, `'`, `'`) + `"` + ",2024-03-04\n"
	cases := []struct {
		name, contentType string
		body              []byte
		format, title     string
		blocks            []block
		tables            []parse.Table
	}{
		{
			name: "notes.txt", body: []byte("\ufeffFirst para\nstill first\n\n  \nSecond\tpara  \n\n\n"),
			format: "text", title: "notes",
			blocks: []block{{"paragraph", "", "First para\nstill first"}, {"paragraph", "", "Second\tpara  "}},
		},
		{
			name: "docs/handbook.md", body: []byte(md), format: "markdown", title: "Handbook",
			blocks: []block{
				{"heading", "Handbook", "Handbook"},
				{"paragraph", "Handbook", "Welcome to **the** handbook.\r\nSecond line."},
				{"heading", "Handbook > Install", "Install"},
				{"list", "Handbook > Install", "- get it\n- run it\n  - twice"},
				{"code", "Handbook > Install", "make  build"},
				{"row", "Handbook > Install", "a | " + injection},
				{"row", "Handbook > Install", "b | "},
				{"heading", "FAQ", "FAQ"},
				{"paragraph", "FAQ", "Ask   away."},
			},
			tables: []parse.Table{{Name: "Install", Columns: []string{"name", "note"}, Rows: [][]string{{"a", injection}, {"b", ""}}}},
		},
		{
			name: "https://example.test/page?x=1", contentType: "text/html; charset=utf-8", body: []byte(html), format: "html", title: "The page",
			blocks: []block{
				{"heading", "Top", "Top"},
				{"paragraph", "Top", "Hello, world!\nNext line."},
				{"paragraph", "Top", "loose text"},
				{"heading", "Top > Sub", "Sub"},
				{"list", "Top > Sub", "1. one\n  - inner\n2. two"},
				{"code", "Top > Sub", "  keep\n    this"},
				{"row", "Top > Sub > People", "Ann | 41"},
				{"row", "Top > Sub > People", "<script> | 7"},
			},
			tables: []parse.Table{{Name: "People", Columns: []string{"who", "age"}, Rows: [][]string{{"Ann", "41"}, {"<script>", "7"}}}},
		},
		{
			name: "staff.csv", body: []byte(csvBody), format: "csv", title: "staff",
			blocks: []block{{"row", "staff", "1 | Ann | 2024-01-02"}, {"row", "staff", "2 | Bo, Jr. | 2024-02-03"}, {"row", "staff", "3 | " + injection + " | 2024-03-04"}},
			tables: []parse.Table{{Name: "staff", Columns: []string{"id", "name", "joined"}, Rows: [][]string{{"1", "Ann", "2024-01-02"}, {"2", "Bo, Jr.", "2024-02-03"}, {"3", injection, "2024-03-04"}}}},
		},
		{
			name: "report.pdf", body: makePDF(t, "Quarterly report", []string{"Revenue grew", "in every region."}, []string{"Costs fell."}),
			format: "pdf", title: "Quarterly report",
			blocks: []block{{"paragraph", "page 1", "Revenue grew\nin every region."}, {"paragraph", "page 2", "Costs fell."}},
		},
		{
			name: "book.bin", contentType: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
			body: makeXLSX(t, []string{"Orders", "Empty", "Notes"}, map[string][][]any{
				"Orders": {{"order", "qty", "city"}, {1001, 3, "Oslo"}, {}, {1002, 2.5, injection}},
				"Notes":  {{"k", "k", ""}, {"x", "y", "z"}},
			}),
			format: "xlsx", title: "book",
			blocks: []block{
				{"row", "Orders", "1001 | 3 | Oslo"}, {"row", "Orders", "1002 | 2.5 | " + injection},
				{"row", "Notes", "x | y | z"},
			},
			tables: []parse.Table{
				{Name: "Orders", Columns: []string{"order", "qty", "city"}, Rows: [][]string{{"1001", "3", "Oslo"}, {"1002", "2.5", injection}}},
				{Name: "Notes", Columns: []string{"k", "k (2)", "column 3"}, Rows: [][]string{{"x", "y", "z"}}},
			},
		},
	}
	for _, c := range cases {
		doc := mustParse(t, c.name, c.contentType, c.body)
		if doc.Format != c.format || doc.Title != c.title {
			t.Errorf("%s: format %q title %q, want %q %q", c.name, doc.Format, doc.Title, c.format, c.title)
		}
		checkBlocks(t, c.name, doc, c.blocks)
		if len(doc.Tables) != len(c.tables) {
			t.Errorf("%s: tables %q, want %q", c.name, doc.Tables, c.tables)
			continue
		}
		for i, tb := range doc.Tables {
			w := c.tables[i]
			if tb.Name != w.Name || !slices.Equal(tb.Columns, w.Columns) || !slices.EqualFunc(tb.Rows, w.Rows, slices.Equal) {
				t.Errorf("%s: table %d %q, want %q", c.name, i, tb, w)
			}
		}
		for _, b := range doc.Blocks {
			if b.Kind == parse.KindRow && doc.Tables[b.Level-1].Name != b.HeadingPath[len(b.HeadingPath)-1] && c.format != "markdown" {
				t.Errorf("%s: row %q names table %d, its path %q", c.name, b.Text, b.Level, b.HeadingPath)
			}
		}
	}
}

// Each format's chunks: sections apart, the heading first, rows under their
// header, the text the blocks'.
func TestEachFormatRoundTripsToItsChunks(t *testing.T) {
	type chunk struct{ kind, path, text string }
	md := "# A\n\nalpha one.\n\n## B\n\n" + words(10, "b") + "\n\n| k | v |\n|---|---|\n| 1 | x |\n| 2 | y |\n| 3 | z |\n\n# C\n\ncee.\n"
	cases := []struct {
		name string
		body []byte
		opt  parse.ChunkOptions
		want []chunk
	}{
		{"a.md", []byte(md), parse.ChunkOptions{MaxTokens: 9, OverlapTokens: 2}, []chunk{
			{"paragraph", "A", "A\n\nalpha one."},
			{"paragraph", "A > B", "B\n\nb0 b1 b2 b3 b4 b5 b6 b7"},
			{"paragraph", "A > B", "b6 b7 b8 b9"},
			{"row", "A > B", "k | v\n1 | x\n2 | y"},
			{"row", "A > B", "k | v\n3 | z"},
			{"paragraph", "C", "C\n\ncee."},
		}},
		{"a.txt", []byte("one two three\n\nfour five\n\nsix seven eight nine"), parse.ChunkOptions{MaxTokens: 6, OverlapTokens: 1}, []chunk{
			{"paragraph", "", "one two three\n\nfour five"},
			{"paragraph", "", "five\n\nsix seven eight nine"},
		}},
		{"r.pdf", makePDF(t, "r", []string{"page one text"}, []string{"page two text"}), parse.DefaultChunkOptions(), []chunk{
			{"paragraph", "page 1", "page one text"},
			{"paragraph", "page 2", "page two text"},
		}},
		{"t.csv", []byte("a,b\n1,2\n3,4\n"), parse.DefaultChunkOptions(), []chunk{{"row", "t", "a | b\n1 | 2\n3 | 4"}}},
		{"titled.md", []byte("# Prices\n\n## 2024\n\n| item | eur |\n|---|---|\n| tea | 3 |\n| cake | 4 |\n| a row too long for one chunk | 5 |\n"),
			parse.ChunkOptions{MaxTokens: 10, OverlapTokens: 2}, []chunk{
				{"row", "Prices > 2024", "Prices\n\n2024\n\nitem | eur\ntea | 3"},
				{"row", "Prices > 2024", "item | eur\ncake | 4"},
				{"row", "Prices > 2024", "item | eur\na row too long for one chunk"},
				{"row", "Prices > 2024", "item | eur\n| 5"},
			}},
		{"w.xlsx", makeXLSX(t, []string{"S"}, map[string][][]any{"S": {{"a", "b"}, {1, 2}}}), parse.DefaultChunkOptions(), []chunk{{"row", "S", "a | b\n1 | 2"}}},
		{"p.html", []byte("<h1>H</h1><p>x y</p><ul><li>l</li></ul><h2>S</h2><pre>code</pre>"), parse.DefaultChunkOptions(), []chunk{
			{"mixed", "H", "H\n\nx y\n\n- l"},
			{"code", "H > S", "S\n\ncode"},
		}},
	}
	for _, c := range cases {
		doc := mustParse(t, c.name, "", c.body)
		var got []chunk
		for i, ch := range parse.Chunks(doc, c.opt) {
			if ch.Ordinal != i {
				t.Errorf("%s: chunk %d has ordinal %d", c.name, i, ch.Ordinal)
			}
			got = append(got, chunk{ch.Kind, strings.Join(ch.HeadingPath, " > "), ch.Text})
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s chunks:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// A long section is cut into chunks no longer than MaxTokens that overlap by
// OverlapTokens, never across a heading, each a slice of the section's text.
func TestChunksKeepSizeOverlapAndSections(t *testing.T) {
	long := words(1000, "w")
	doc := mustParse(t, "x.md", "", []byte("# One\n\n"+long+"\n\n"+words(30, "p")+"\n\n# Two\n\n"+words(5, "t")+"\n"))
	opt := parse.ChunkOptions{MaxTokens: 100, OverlapTokens: 10}
	chunks := parse.Chunks(doc, opt)
	var prev []string
	for _, c := range chunks {
		if n := parse.Tokens(c.Text); n > opt.MaxTokens {
			t.Errorf("chunk %d has %d tokens, over %d", c.Ordinal, n, opt.MaxTokens)
		}
		words := strings.Fields(c.Text)
		if c.HeadingPath[0] == "One" && prev != nil && words[0] != "One" {
			if got, want := words[:10], prev[len(prev)-10:]; !slices.Equal(got, want) {
				t.Errorf("chunk %d starts %q, want the overlap %q", c.Ordinal, got, want)
			}
		}
		if c.HeadingPath[0] == "Two" && strings.Contains(c.Text, "w1") {
			t.Errorf("chunk %d of section Two holds section One's text: %q", c.Ordinal, c.Text)
		}
		prev = words
	}
	if last := chunks[len(chunks)-1]; last.Text != "Two\n\n"+words(5, "t") {
		t.Errorf("last chunk %q", last.Text)
	}
	if !strings.HasPrefix(chunks[0].Text, "One\n\nw0 w1") || len(chunks) < 11 {
		t.Errorf("%d chunks, the first %q", len(chunks), chunks[0].Text)
	}
}

func TestRefusals(t *testing.T) {
	pdf := makePDF(t, "t", []string{"some text"})
	small := parse.Limits{MaxBytes: 1 << 20, MaxExpandedBytes: 4 << 20, MaxPages: 2}
	cases := []struct {
		what, name, contentType string
		body                    []byte
		lim                     parse.Limits
		code                    string
	}{
		{"a 50 MB input", "big.txt", "", bytes.Repeat([]byte("a "), 25<<20), parse.DefaultLimits(), parse.CodeDocumentTooLarge},
		{"an input over MaxBytes", "a.md", "", bytes.Repeat([]byte("x"), 1<<20+1), small, parse.CodeDocumentTooLarge},
		{"an unknown binary", "blob", "", []byte{0x7f, 'E', 'L', 'F', 0, 0, 1, 2, 0xff}, parse.DefaultLimits(), parse.CodeUnsupportedFormat},
		{"an unknown content type", "a.txt", "image/png", []byte("\x89PNG"), parse.DefaultLimits(), parse.CodeUnsupportedFormat},
		{"an unknown extension of binary bytes", "a.docx", "", []byte("PK\x03\x04garbage"), parse.DefaultLimits(), parse.CodeUnsupportedFormat},
		{"a truncated PDF", "t.pdf", "", pdf[:len(pdf)/2], parse.DefaultLimits(), parse.CodeMalformedDocument},
		{"a PDF header over garbage", "g.pdf", "", []byte("%PDF-1.4\n" + strings.Repeat("garbage ", 100) + "\nstartxref\n9\n%%EOF\n"), parse.DefaultLimits(), parse.CodeMalformedDocument},
		{"a PDF over MaxPages", "p.pdf", "", makePDF(t, "p", []string{"1"}, []string{"2"}, []string{"3"}), small, parse.CodeDocumentTooLarge},
		{"a zip bomb XLSX", "bomb.xlsx", "", parsetest.ZipBombXLSX(t, 8<<20), small, parse.CodeDocumentTooLarge},
		{"a zip bomb XLSX at the default limits", "bomb.xlsx", "", parsetest.ZipBombXLSX(t, 120<<20), parse.DefaultLimits(), parse.CodeDocumentTooLarge},
		{"an XLSX that is not a zip", "n.xlsx", "", []byte("id,name\n1,a\n"), parse.DefaultLimits(), parse.CodeMalformedDocument},
		{"a CSV with a bare quote", "q.csv", "", []byte("a,b\n1,x\"y\n"), parse.DefaultLimits(), parse.CodeMalformedDocument},
		{"an unclosed CSV quote", "q.csv", "", []byte("a,b\n1,\"open\n"), parse.DefaultLimits(), parse.CodeMalformedDocument},
		{"Markdown that is not UTF-8", "l.md", "", []byte("caf\xe9"), parse.DefaultLimits(), parse.CodeMalformedDocument},
		{"Markdown nesting 40,000 lists on a line", "n.md", "", []byte(strings.Repeat("- ", 40000) + "x\n"), parse.DefaultLimits(), parse.CodeMalformedDocument},
		{"a Markdown table padding short rows to a wide header", "w.md", "",
			[]byte(strings.Repeat("|a", 500) + "\n" + strings.Repeat("|-", 500) + "\n" + strings.Repeat("|b\n", 200000)), small, parse.CodeDocumentTooLarge},
		{"HTML nesting 100,000 elements", "d.html", "", []byte(strings.Repeat("<div>", 100000)), parse.DefaultLimits(), parse.CodeMalformedDocument},
		{"text expanding past MaxExpandedBytes in blocks", "many.txt", "", bytes.Repeat([]byte("a\n\n"), 300000), parse.Limits{MaxExpandedBytes: 1 << 20}, parse.CodeDocumentTooLarge},
	}
	for _, c := range cases {
		doc, err := parse.Parse(context.Background(), c.name, c.contentType, c.body, c.lim)
		var pe *parse.ParseError
		if !errors.As(err, &pe) || pe.Code != c.code {
			t.Errorf("%s: %v (document %v), want %s", c.what, err, doc != nil, c.code)
		}
	}
}

// A zip entry that inflates past the size its header declares is cut off there
// (archive/zip refuses to read on), so the declared sizes the limit sums are the
// most a workbook can cost: parsed or refused, it is never inflated.
func TestLyingZipIsNotInflated(t *testing.T) {
	body := lyingXLSX(t, 64<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := parse.Parse(context.Background(), "lie.xlsx", "", body, parse.DefaultLimits())
	runtime.ReadMemStats(&after)
	var pe *parse.ParseError
	if err != nil && !errors.As(err, &pe) {
		t.Fatalf("%v is not a ParseError", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("parsing a %d-byte zip that lies about a 64 MiB entry allocated %d bytes", len(body), grew)
	}
}

// Bytes a reader was never meant to see: every mutation of a real PDF or workbook
// parses or is refused as malformed (or too large), never a panic.
func TestMutatedFilesNeverPanic(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 31))
	seeds := map[string][]byte{
		"m.pdf":  makePDF(t, "m", []string{"alpha beta", "gamma"}, []string{"delta"}),
		"m.xlsx": makeXLSX(t, []string{"S"}, map[string][][]any{"S": {{"a", "b"}, {1, "x"}, {2, "y"}}}),
	}
	for name, seed := range seeds {
		for i := 0; i < 300; i++ {
			body := bytes.Clone(seed)
			switch i % 3 {
			case 0: // flip bytes
				for j := 0; j < 1+rng.IntN(20); j++ {
					body[rng.IntN(len(body))] = byte(rng.IntN(256))
				}
			case 1: // cut
				body = body[:rng.IntN(len(body))]
			case 2: // overwrite a run with one of the file's own runs
				from, to, n := rng.IntN(len(body)), rng.IntN(len(body)), rng.IntN(200)
				copy(body[to:], body[from:min(len(body), from+n)])
			}
			_, err := parse.Parse(context.Background(), name, "", body, parse.DefaultLimits())
			var pe *parse.ParseError
			if err != nil && !errors.As(err, &pe) {
				t.Fatalf("%s mutation %d: %v is not a ParseError", name, i, err)
			}
		}
	}
}

func TestParseStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	bodies := map[string][]byte{
		"a.txt": bytes.Repeat([]byte("para\n\n"), 5000), "a.md": bytes.Repeat([]byte("para\n\n"), 5000),
		"a.pdf": makePDF(t, "a", []string{"x"}), "a.csv": []byte("a\n1\n"),
	}
	for name, body := range bodies {
		if _, err := parse.Parse(ctx, name, "", body, parse.DefaultLimits()); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", name, err)
		}
	}
}

func TestDetectFormat(t *testing.T) {
	xlsx := makeXLSX(t, []string{"S"}, map[string][][]any{"S": {{"a"}}})
	cases := []struct {
		name, contentType string
		body              []byte
		want              string
	}{
		{"a.md", "", []byte("# x"), "markdown"},
		{"a.md", "text/plain; charset=utf-8", []byte("# x"), "markdown"},
		{"a.txt", "text/markdown", []byte("# x"), "markdown"},
		{"README", "", []byte("plain words"), "text"},
		{"a.py", "text/x-python", []byte("print(1)"), "text"},
		{"upload", "application/octet-stream", []byte("%PDF-1.7\n"), "pdf"},
		{"upload", "", []byte("<!DOCTYPE html><p>x"), "html"},
		{"upload", "", xlsx, "xlsx"},
		{"https://h.test/a.CSV?download=1", "", []byte("a,b"), "csv"},
		{"x.HTM", "", nil, "html"},
		{"a.json", "application/json", []byte("{}"), ""},
		{"upload", "", []byte{0xff, 0xfe, 0}, ""},
		{"a.zip", "", []byte("PK\x03\x04..."), ""},
	}
	for _, c := range cases {
		if got := parse.DetectFormat(c.name, c.contentType, c.body); got != c.want {
			t.Errorf("DetectFormat(%q, %q) = %q, want %q", c.name, c.contentType, got, c.want)
		}
	}
}

// A Markdown document larger than one parse segment keeps its blocks whole across
// the cuts, and a fenced code block longer than a segment stays one block.
func TestLongMarkdownKeepsItsBlocks(t *testing.T) {
	var b strings.Builder
	want := 0
	for b.Len() < 100<<10 {
		b.WriteString("## Part\n\n" + words(200, "w") + "\n\n")
		want += 2
	}
	code := strings.Repeat("line of code\n\n", 4000)
	b.WriteString("```\n" + code + "```\n")
	doc := mustParse(t, "long.md", "", []byte(b.String()))
	if len(doc.Blocks) != want+1 {
		t.Fatalf("%d blocks, want %d", len(doc.Blocks), want+1)
	}
	if last := doc.Blocks[len(doc.Blocks)-1]; last.Kind != parse.KindCode || last.Text != strings.TrimSuffix(code, "\n") {
		t.Errorf("the fenced block came back as %s of %d bytes", last.Kind, len(last.Text))
	}
	for _, blk := range doc.Blocks[:want] {
		if blk.Kind == parse.KindParagraph && blk.Text != words(200, "w") {
			t.Errorf("a paragraph came back cut: %d bytes", len(blk.Text))
		}
	}
}

// A PDF 2.0 file (its header says so) reads as its 1.x twin does.
func TestPDF20HeaderReads(t *testing.T) {
	body := makePDF(t, "two", []string{"version two"})
	if !bytes.HasPrefix(body, []byte("%PDF-1.")) {
		t.Fatalf("fpdf wrote %q", body[:8])
	}
	copy(body, "%PDF-2.0")
	checkBlocks(t, "a PDF 2.0", mustParse(t, "v2.pdf", "", body), []block{{"paragraph", "page 1", "version two"}})
}

// countdown is a context that ends after its Err was asked n times: a parse that
// never asks again mid-document runs to its end and fails the test.
type countdown struct {
	context.Context
	n int
}

func (c *countdown) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// Every format asks the context again while it reads, not only before it starts.
func TestParseStopsMidDocumentWhenTheContextEnds(t *testing.T) {
	var pages [][]string
	var rows [][]any
	for i := 0; i < 40; i++ {
		pages = append(pages, []string{words(10, "p")})
	}
	for i := 0; i < 5000; i++ {
		rows = append(rows, []any{i, "x"})
	}
	para := words(20, "w") + "\n\n"
	bodies := map[string][]byte{
		"a.txt":  []byte(strings.Repeat(para, 5000)),
		"a.md":   []byte(strings.Repeat(para, 5000)),
		"a.html": []byte(strings.Repeat("<p>"+para+"</p>", 5000)),
		"a.csv":  []byte("a,b\n" + strings.Repeat("1,x\n", 5000)),
		"a.pdf":  makePDF(t, "a", pages...),
		"a.xlsx": makeXLSX(t, []string{"S"}, map[string][][]any{"S": rows}),
	}
	for name, body := range bodies {
		if _, err := parse.Parse(context.Background(), name, "", body, parse.DefaultLimits()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := parse.Parse(&countdown{Context: context.Background(), n: 2}, name, "", body, parse.DefaultLimits()); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled mid-document", name, err)
		}
	}
}
