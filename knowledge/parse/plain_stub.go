// Package parse turns an uploaded document into blocks and chunks. This file is a
// stand-in for plain text only, with the package's contract, so the knowledge plane
// builds before the real parsers land; the merge replaces it. The contract names both
// a type and a function Chunk, which Go cannot hold in one package: the function is
// Chunks here.
package parse

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits bound what a parse may read and produce.
type Limits struct {
	MaxBytes         int64
	MaxExpandedBytes int64
	MaxPages         int
}

// Document is a parsed document.
type Document struct {
	Title, Format string
	Blocks        []Block
	Tables        []Table
}

// Block is one structural piece of a document.
type Block struct {
	Kind        string // heading|paragraph|list|code|row
	Level       int
	HeadingPath []string
	Text        string
}

// Table is a table found in a document.
type Table struct {
	Name    string
	Columns []string
	Rows    [][]string
}

// ChunkOptions sizes the chunks.
type ChunkOptions struct{ MaxTokens, OverlapTokens int }

// Chunk is one searchable piece of a document.
type Chunk struct {
	Ordinal     int
	HeadingPath []string
	Kind, Text  string
}

// Error codes of a ParseError.
const (
	CodeUnsupportedFormat = "UNSUPPORTED_FORMAT"
	CodeMalformedDocument = "MALFORMED_DOCUMENT"
	CodeDocumentTooLarge  = "DOCUMENT_TOO_LARGE"
)

// ParseError is a document the parser refuses.
type ParseError struct {
	Code    string
	Message string
}

func (e *ParseError) Error() string { return e.Code + ": " + e.Message }

// Parse parses body (plain text only in this stand-in).
func Parse(ctx context.Context, name, contentType string, body []byte, lim Limits) (*Document, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if lim.MaxBytes > 0 && int64(len(body)) > lim.MaxBytes {
		return nil, &ParseError{Code: CodeDocumentTooLarge, Message: fmt.Sprintf("the document is %d bytes, over the limit of %d", len(body), lim.MaxBytes)}
	}
	ct := strings.ToLower(strings.TrimSpace(strings.SplitN(contentType, ";", 2)[0]))
	if ct != "" && ct != "text/plain" {
		return nil, &ParseError{Code: CodeUnsupportedFormat, Message: fmt.Sprintf("content type %q is not supported", contentType)}
	}
	if ct == "" && !strings.HasSuffix(strings.ToLower(name), ".txt") {
		return nil, &ParseError{Code: CodeUnsupportedFormat, Message: fmt.Sprintf("the format of %q is not known", name)}
	}
	if !utf8.Valid(body) {
		return nil, &ParseError{Code: CodeMalformedDocument, Message: "the text is not UTF-8"}
	}
	doc := &Document{Format: "text"}
	for _, p := range strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			doc.Blocks = append(doc.Blocks, Block{Kind: "paragraph", Text: p})
		}
	}
	if len(doc.Blocks) > 0 {
		doc.Title = firstLine(doc.Blocks[0].Text)
	}
	return doc, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

// Chunks packs blocks into chunks of at most MaxTokens words (whitespace-separated),
// the last OverlapTokens words of one chunk opening the next.
func Chunks(doc *Document, opt ChunkOptions) []Chunk {
	if opt.MaxTokens <= 0 {
		opt.MaxTokens = 200
	}
	if opt.OverlapTokens < 0 || opt.OverlapTokens >= opt.MaxTokens {
		opt.OverlapTokens = 0
	}
	var out []Chunk
	var words []string
	var path []string
	flush := func() {
		if len(words) == 0 {
			return
		}
		out = append(out, Chunk{Ordinal: len(out), HeadingPath: path, Kind: "paragraph", Text: strings.Join(words, " ")})
		if opt.OverlapTokens > 0 && len(words) > opt.OverlapTokens {
			words = append([]string(nil), words[len(words)-opt.OverlapTokens:]...)
		} else {
			words = nil
		}
	}
	for _, b := range doc.Blocks {
		path = b.HeadingPath
		for _, w := range strings.Fields(b.Text) {
			words = append(words, w)
			if len(words) >= opt.MaxTokens {
				flush()
			}
		}
	}
	if len(words) > opt.OverlapTokens || len(out) == 0 {
		flush()
	}
	return out
}
