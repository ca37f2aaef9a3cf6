// Package parse turns an uploaded knowledge document into its structure: blocks
// (headings, paragraphs, lists, code, table rows) under their heading paths, and the
// tables it holds; Chunk cuts that structure into search chunks. It is pure code: no
// store, no network, nothing kept between calls.
//
// Formats: plain text, Markdown, HTML, PDF, CSV and XLSX (Format* constants). Text is
// kept as the document has it; only HTML's whitespace runs collapse, as a browser
// shows them. Every refusal is a *ParseError with one of three codes.
package parse

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
)

// The formats Parse reads: Document.Format holds one of them.
const (
	FormatText     = "text"
	FormatMarkdown = "markdown"
	FormatHTML     = "html"
	FormatPDF      = "pdf"
	FormatCSV      = "csv"
	FormatXLSX     = "xlsx"
)

// The block kinds.
const (
	KindHeading   = "heading"
	KindParagraph = "paragraph"
	KindList      = "list"
	KindCode      = "code"
	KindRow       = "row"
)

// Limits bound what one document may cost to parse.
type Limits struct {
	// MaxBytes bounds the body as uploaded.
	MaxBytes int64
	// MaxExpandedBytes bounds what the body expands to: an XLSX's unzipped parts, a
	// PDF's decompressed page contents, and the text and cells Parse returns.
	MaxExpandedBytes int64
	// MaxPages bounds a PDF's page count.
	MaxPages int
}

// DefaultLimits: 25 MiB uploaded (a 50 MB file is refused), 100 MiB expanded, 2,000
// PDF pages.
func DefaultLimits() Limits {
	return Limits{MaxBytes: 25 << 20, MaxExpandedBytes: 100 << 20, MaxPages: 2000}
}

// Document is a parsed document.
type Document struct {
	Title  string
	Format string
	Blocks []Block
	Tables []Table
}

// Block is one structural unit of a document, in document order.
type Block struct {
	// Kind is heading, paragraph, list, code or row.
	Kind string
	// Level is a heading's level (1–6); for a row, 1 + the index of its table in
	// Document.Tables; 0 otherwise.
	Level int
	// HeadingPath is the headings the block sits under, outermost first; a heading's
	// path ends with the heading itself. A row's path ends with its table's name
	// (once: a Markdown table is named after the heading it sits under).
	HeadingPath []string
	// Text is the block's text as the document has it (Markdown source for Markdown;
	// a row's cells joined by " | ").
	Text string
}

// Table is a table found in a document: a CSV, an XLSX sheet, a Markdown or HTML
// table. Columns are its header row; every row has len(Columns) cells.
type Table struct {
	Name    string
	Columns []string
	Rows    [][]string
}

// The codes of a ParseError.
const (
	CodeUnsupportedFormat = "UNSUPPORTED_FORMAT"
	CodeMalformedDocument = "MALFORMED_DOCUMENT"
	CodeDocumentTooLarge  = "DOCUMENT_TOO_LARGE"
)

// ParseError is why a document was refused; Code is one of the Code* constants.
type ParseError struct {
	Code    string
	Message string
}

func (e *ParseError) Error() string { return e.Code + ": " + e.Message }

// Status is the HTTP status the caller's edge answers the error with: 415, 422 or 413.
func (e *ParseError) Status() int {
	switch e.Code {
	case CodeUnsupportedFormat:
		return 415
	case CodeDocumentTooLarge:
		return 413
	default:
		return 422
	}
}

func unsupported(format string, args ...any) error {
	return &ParseError{Code: CodeUnsupportedFormat, Message: fmt.Sprintf(format, args...)}
}

func malformed(format string, args ...any) error {
	return &ParseError{Code: CodeMalformedDocument, Message: fmt.Sprintf(format, args...)}
}

func tooLarge(format string, args ...any) error {
	return &ParseError{Code: CodeDocumentTooLarge, Message: fmt.Sprintf(format, args...)}
}

// Parse reads one document. name (a file name or URI) and contentType help find its
// format (DetectFormat); either may be empty. A zero field of lim takes
// DefaultLimits' value. The error is a *ParseError, or ctx's error when ctx ended
// first.
func Parse(ctx context.Context, name, contentType string, body []byte, lim Limits) (doc *Document, err error) {
	lim = lim.withDefaults()
	if int64(len(body)) > lim.MaxBytes {
		return nil, tooLarge("the document is %d bytes, over the limit of %d", len(body), lim.MaxBytes)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	format := DetectFormat(name, contentType, body)
	if format == "" {
		return nil, unsupported("the format of %q (content type %q) is not one of text, markdown, html, pdf, csv, xlsx", name, contentType)
	}
	// The third-party readers meet hostile bytes here: whatever one of them panics
	// on is a malformed document, not a crashed process.
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, malformed("the %s document could not be read: %v", format, r)
		}
	}()
	p := &parser{ctx: ctx, lim: lim, budget: lim.MaxExpandedBytes}
	switch format {
	case FormatText:
		doc, err = p.text(body)
	case FormatMarkdown:
		doc, err = p.markdown(body)
	case FormatHTML:
		doc, err = p.html(body)
	case FormatPDF:
		doc, err = p.pdf(body)
	case FormatCSV:
		doc, err = p.csv(name, body)
	case FormatXLSX:
		doc, err = p.xlsx(body)
	}
	if err != nil {
		return nil, err
	}
	doc.Format = format
	if doc.Title == "" {
		doc.Title = titleFromName(name)
	}
	return doc, nil
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxExpandedBytes <= 0 {
		l.MaxExpandedBytes = d.MaxExpandedBytes
	}
	if l.MaxPages <= 0 {
		l.MaxPages = d.MaxPages
	}
	return l
}

// parser is one Parse call's state: its context, its limits and what is left of the
// expanded-bytes budget.
type parser struct {
	ctx    context.Context
	lim    Limits
	budget int64
	steps  int
}

// spend charges n bytes of output against MaxExpandedBytes.
func (p *parser) spend(n int64) error {
	p.budget -= n
	if p.budget < 0 {
		return tooLarge("the document expands past the limit of %d bytes", p.lim.MaxExpandedBytes)
	}
	return nil
}

// tick checks the context every 1024 calls: loops over nodes, rows and pages call it
// once per item.
func (p *parser) tick() error {
	p.steps++
	if p.steps&1023 == 0 {
		return p.ctx.Err()
	}
	return nil
}

// add appends a block, charging its text.
func (p *parser) add(doc *Document, b Block) error {
	if err := p.spend(int64(len(b.Text)) + 64); err != nil {
		return err
	}
	doc.Blocks = append(doc.Blocks, b)
	return p.tick()
}

// titleFromName is a name's last path element without its extension.
func titleFromName(name string) string {
	if i := strings.IndexAny(name, "?#"); i >= 0 && strings.Contains(name, "://") {
		name = name[:i]
	}
	base := path.Base(strings.ReplaceAll(name, "\\", "/"))
	if base == "." || base == "/" {
		return ""
	}
	return strings.TrimSuffix(base, path.Ext(base))
}

// headingStack keeps the headings above the current point of a document.
type headingStack struct {
	levels []int
	titles []string
}

// push opens a heading of level and returns its path (ending with it).
func (h *headingStack) push(level int, title string) []string {
	for len(h.levels) > 0 && h.levels[len(h.levels)-1] >= level {
		h.levels = h.levels[:len(h.levels)-1]
		h.titles = h.titles[:len(h.titles)-1]
	}
	h.levels = append(h.levels, level)
	h.titles = append(h.titles, title)
	return h.path()
}

func (h *headingStack) path() []string {
	if len(h.titles) == 0 {
		return nil
	}
	return append([]string(nil), h.titles...)
}

// IsParseError reports whether err is a *ParseError with code.
func IsParseError(err error, code string) bool {
	var pe *ParseError
	return errors.As(err, &pe) && pe.Code == code
}
