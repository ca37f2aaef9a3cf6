package parse

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/ledongthuc/pdf"
)

// pdf reads a PDF's text page by page (github.com/ledongthuc/pdf): each page's
// paragraphs (runs of non-blank lines) under the heading path ["page N"], so a
// chunk never runs across a page and cites the page it came from. The title is the
// document information's Title. A page's content streams are inflated once
// against MaxExpandedBytes before their text is read, so a stream bomb is refused
// rather than interpreted; the page tree is walked here, bounded, rather than by
// the reader's Page (which follows a cyclic tree forever).
func (p *parser) pdf(body []byte) (*Document, error) {
	r, err := pdf.NewReader(pdfHeader17{bytes.NewReader(body)}, int64(len(body)))
	if err != nil {
		return nil, malformed("the PDF could not be read: %v", err)
	}
	pages, err := p.pdfPages(r)
	if err != nil {
		return nil, err
	}
	doc := &Document{Title: strings.TrimSpace(r.Trailer().Key("Info").Key("Title").Text())}
	inflated := int64(0)
	for i, v := range pages {
		if err := p.ctx.Err(); err != nil {
			return nil, err
		}
		page := pdf.Page{V: v}
		n, err := p.inflatedSize(page.V.Key("Contents"), p.lim.MaxExpandedBytes-inflated)
		if err != nil {
			return nil, err
		}
		inflated += n
		text, err := page.GetPlainText(nil)
		if err != nil {
			return nil, malformed("the PDF's page %d could not be read: %v", i+1, err)
		}
		path := []string{fmt.Sprintf("page %d", i+1)}
		for _, para := range paragraphs(text) {
			if err := p.add(doc, Block{Kind: KindParagraph, HeadingPath: path, Text: para}); err != nil {
				return nil, err
			}
		}
	}
	return doc, nil
}

// pdfPages lists the page objects of the page tree in order, refusing more than
// MaxPages pages, and a tree deeper than 64 levels or with more nodes than a tree of
// its pages can have (a cycle) as malformed.
func (p *parser) pdfPages(r *pdf.Reader) ([]pdf.Value, error) {
	const maxDepth = 64
	var pages []pdf.Value
	nodes := 0
	var visit func(node pdf.Value, depth int) error
	visit = func(node pdf.Value, depth int) error {
		nodes++
		if depth > maxDepth || nodes > 2*p.lim.MaxPages+maxDepth {
			return malformed("the PDF's page tree is cyclic or too deep")
		}
		if err := p.tick(); err != nil {
			return err
		}
		switch node.Key("Type").Name() {
		case "Page":
			if len(pages) == p.lim.MaxPages {
				return tooLarge("the PDF has more than %d pages", p.lim.MaxPages)
			}
			pages = append(pages, node)
		case "Pages":
			kids := node.Key("Kids")
			for i := 0; i < kids.Len(); i++ {
				if err := visit(kids.Index(i), depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	root := r.Trailer().Key("Root").Key("Pages")
	if root.IsNull() {
		return nil, malformed("the PDF has no page tree")
	}
	if err := visit(root, 0); err != nil {
		return nil, err
	}
	return pages, nil
}

// inflatedSize is what a page's content streams inflate to, refused past room.
func (p *parser) inflatedSize(contents pdf.Value, room int64) (int64, error) {
	streams := []pdf.Value{contents}
	if contents.Kind() == pdf.Array {
		streams = streams[:0]
		for i := 0; i < contents.Len(); i++ {
			streams = append(streams, contents.Index(i))
		}
	}
	var total int64
	buf := make([]byte, 64<<10)
	for _, s := range streams {
		if s.Kind() != pdf.Stream {
			continue
		}
		rd := s.Reader()
		for {
			n, err := rd.Read(buf)
			total += int64(n)
			if total > room {
				rd.Close()
				return 0, tooLarge("the PDF's pages inflate past the limit of %d bytes", p.lim.MaxExpandedBytes)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				rd.Close()
				return 0, malformed("a PDF content stream could not be read: %v", err)
			}
			if err := p.ctx.Err(); err != nil {
				rd.Close()
				return 0, err
			}
		}
		rd.Close()
	}
	return total, nil
}

// pdfHeader17 shows a PDF 2.0 file's header as 1.7's: the reader refuses any
// header but %PDF-1.0 to 1.7, and reads 2.0's syntax, a superset for text, as is.
type pdfHeader17 struct{ r *bytes.Reader }

func (h pdfHeader17) ReadAt(p []byte, off int64) (int, error) {
	n, err := h.r.ReadAt(p, off)
	if off < 8 && bytes.HasPrefix(p[:n], []byte("%PDF-2.0")[off:min(8, off+int64(n))]) {
		copy(p, []byte("%PDF-1.7")[off:min(8, off+int64(n))])
	}
	return n, err
}
