package parse

import (
	"fmt"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// maxHTMLDepth bounds the element nesting the walk follows: deeper markup is refused
// as malformed rather than walked on an ever deeper stack.
const maxHTMLDepth = 512

// skipped elements hold no document text.
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Math: true, atom.Iframe: true, atom.Object: true,
	atom.Canvas: true, atom.Head: true, atom.Select: true, atom.Button: true,
}

// blockLevel elements end the paragraph of loose text before them and after them.
var blockLevel = map[atom.Atom]bool{
	atom.Html: true, atom.Body: true, atom.Div: true, atom.Section: true, atom.Article: true,
	atom.Main: true, atom.Header: true, atom.Footer: true, atom.Nav: true, atom.Aside: true,
	atom.Blockquote: true, atom.Figure: true, atom.Figcaption: true, atom.Details: true,
	atom.Summary: true, atom.Dl: true, atom.Dt: true, atom.Dd: true, atom.Address: true,
	atom.Form: true, atom.Fieldset: true, atom.Legend: true, atom.Center: true, atom.Li: true,
	atom.Hr: true, atom.Caption: true,
}

var headingLevel = map[atom.Atom]int{atom.H1: 1, atom.H2: 2, atom.H3: 3, atom.H4: 4, atom.H5: 5, atom.H6: 6}

// html reads HTML (golang.org/x/net/html, the HTML5 parsing algorithm browsers use):
// headings, paragraphs (p, and loose text between blocks), lists, pre as code and
// tables; script, style and other non-text elements are dropped. Whitespace runs
// collapse to one space as a browser shows them (br is a line break); pre keeps its
// text as it is.
func (p *parser) html(body []byte) (*Document, error) {
	s, err := textBody(FormatHTML, body)
	if err != nil {
		return nil, err
	}
	root, err := html.Parse(strings.NewReader(s))
	if err != nil {
		return nil, malformed("the HTML could not be read: %v", err)
	}
	w := &htmlWalker{p: p, doc: &Document{}}
	w.doc.Title = titleOf(root)
	if err := w.walk(root, 0); err != nil {
		return nil, err
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	return w.doc, nil
}

type htmlWalker struct {
	p     *parser
	doc   *Document
	heads headingStack
	loose inlineText // text outside any p, heading, list or table
}

func (w *htmlWalker) walk(n *html.Node, depth int) error {
	if depth > maxHTMLDepth {
		return malformed("the HTML nests elements deeper than %d", maxHTMLDepth)
	}
	if err := w.p.tick(); err != nil {
		return err
	}
	switch n.Type {
	case html.TextNode:
		w.loose.text(n.Data)
		return nil
	case html.ElementNode:
	default:
		return w.children(n, depth)
	}
	if skipped[n.DataAtom] {
		return nil
	}
	if level, ok := headingLevel[n.DataAtom]; ok {
		if err := w.flush(); err != nil {
			return err
		}
		title := collapsedText(n)
		if title == "" {
			return nil
		}
		if w.doc.Title == "" && level == 1 {
			w.doc.Title = title
		}
		return w.p.add(w.doc, Block{Kind: KindHeading, Level: level, HeadingPath: w.heads.push(level, title), Text: title})
	}
	switch n.DataAtom {
	case atom.P:
		return w.block(KindParagraph, collapsedText(n))
	case atom.Pre:
		return w.block(KindCode, strings.TrimPrefix(rawText(n), "\n"))
	case atom.Ul, atom.Ol:
		var b strings.Builder
		listText(&b, n, "", 0)
		return w.block(KindList, b.String())
	case atom.Table:
		if err := w.flush(); err != nil {
			return err
		}
		return w.table(n)
	case atom.Br:
		w.loose.lineBreak()
		return nil
	}
	if !blockLevel[n.DataAtom] {
		return w.children(n, depth)
	}
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.children(n, depth); err != nil {
		return err
	}
	return w.flush()
}

func (w *htmlWalker) children(n *html.Node, depth int) error {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if err := w.walk(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// block ends the loose paragraph and adds a block of kind, unless it is blank.
func (w *htmlWalker) block(kind, text string) error {
	if err := w.flush(); err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return nil
	}
	return w.p.add(w.doc, Block{Kind: kind, HeadingPath: w.heads.path(), Text: text})
}

// flush adds the loose text gathered so far as a paragraph.
func (w *htmlWalker) flush() error {
	text := w.loose.String()
	w.loose = inlineText{}
	if text == "" {
		return nil
	}
	return w.p.add(w.doc, Block{Kind: KindParagraph, HeadingPath: w.heads.path(), Text: text})
}

// table adds an HTML table: its first row is the header when it is in thead or all
// th; otherwise the columns are numbered and every row is data. Nested tables are
// text of their cell.
func (w *htmlWalker) table(t *html.Node) error {
	var rows [][]string
	headerFound := false
	var visit func(n *html.Node, depth int)
	visit = func(n *html.Node, depth int) {
		for c := n.FirstChild; c != nil && depth < maxHTMLDepth; c = c.NextSibling {
			if c.Type != html.ElementNode {
				continue
			}
			switch c.DataAtom {
			case atom.Tr:
				var cells []string
				allTH := true
				for cell := c.FirstChild; cell != nil; cell = cell.NextSibling {
					if cell.Type != html.ElementNode || cell.DataAtom != atom.Td && cell.DataAtom != atom.Th {
						continue
					}
					allTH = allTH && cell.DataAtom == atom.Th
					cells = append(cells, collapsedText(cell))
				}
				if len(rows) == 0 && len(cells) > 0 && (allTH || n.DataAtom == atom.Thead) {
					headerFound = true
				}
				if len(cells) > 0 {
					rows = append(rows, cells)
				}
			case atom.Table:
			default:
				visit(c, depth+1)
			}
		}
	}
	visit(t, 0)
	name := ""
	for c := t.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.DataAtom == atom.Caption {
			name = collapsedText(c)
		}
	}
	if path := w.heads.path(); name == "" && len(path) > 0 {
		name = path[len(path)-1]
	}
	var header []string
	if headerFound {
		header, rows = rows[0], rows[1:]
	}
	return w.p.addTable(w.doc, w.heads.path(), name, header, rows)
}

// titleOf is the document's <title>.
func titleOf(root *html.Node) string {
	var found string
	var visit func(n *html.Node, depth int)
	visit = func(n *html.Node, depth int) {
		for c := n.FirstChild; c != nil && found == "" && depth < 8; c = c.NextSibling {
			if c.Type == html.ElementNode && c.DataAtom == atom.Title {
				found = collapsedText(c)
				return
			}
			if c.Type == html.ElementNode && (c.DataAtom == atom.Html || c.DataAtom == atom.Head) {
				visit(c, depth+1)
			}
		}
	}
	visit(root, 0)
	return found
}

// listText writes a list, an item a line: "- " before an unordered item, "N. "
// before an ordered one, nested lists indented under their item.
func listText(b *strings.Builder, list *html.Node, indent string, depth int) {
	n := 0
	for li := list.FirstChild; li != nil; li = li.NextSibling {
		if li.Type != html.ElementNode || li.DataAtom != atom.Li {
			continue
		}
		n++
		var own inlineText
		var nested []*html.Node
		for c := li.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && (c.DataAtom == atom.Ul || c.DataAtom == atom.Ol) {
				nested = append(nested, c)
				continue
			}
			own.node(c, 0)
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		marker := "- "
		if list.DataAtom == atom.Ol {
			marker = fmt.Sprintf("%d. ", n)
		}
		b.WriteString(indent + marker + own.String())
		for _, sub := range nested {
			if depth < maxHTMLDepth {
				listText(b, sub, indent+"  ", depth+1)
			}
		}
	}
}

// collapsedText is an element's text, whitespace collapsed.
func collapsedText(n *html.Node) string {
	var t inlineText
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		t.node(c, 0)
	}
	return t.String()
}

// rawText is an element's text as it is (pre).
func rawText(n *html.Node) string {
	var b strings.Builder
	var visit func(n *html.Node, depth int)
	visit = func(n *html.Node, depth int) {
		for c := n.FirstChild; c != nil && depth < maxHTMLDepth; c = c.NextSibling {
			switch {
			case c.Type == html.TextNode:
				b.WriteString(c.Data)
			case c.Type == html.ElementNode && c.DataAtom == atom.Br:
				b.WriteByte('\n')
			case c.Type == html.ElementNode && !skipped[c.DataAtom]:
				visit(c, depth+1)
			}
		}
	}
	visit(n, 0)
	return b.String()
}

// inlineText gathers text as a browser lays out inline content: runs of HTML
// whitespace become one space, br a line break, none at either end.
type inlineText struct {
	b     strings.Builder
	space bool // a space is owed before the next visible character
}

func (t *inlineText) node(n *html.Node, depth int) {
	switch {
	case depth > maxHTMLDepth:
	case n.Type == html.TextNode:
		t.text(n.Data)
	case n.Type == html.ElementNode && n.DataAtom == atom.Br:
		t.lineBreak()
	case n.Type == html.ElementNode && skipped[n.DataAtom]:
	default:
		if n.Type == html.ElementNode && blockLevel[n.DataAtom] || headingLevel[n.DataAtom] > 0 || n.DataAtom == atom.P ||
			n.DataAtom == atom.Td || n.DataAtom == atom.Th || n.DataAtom == atom.Tr {
			t.space = true // adjacent blocks and cells do not run together
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			t.node(c, depth+1)
		}
	}
}

func (t *inlineText) text(s string) {
	for _, r := range s {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' {
			t.space = true
			continue
		}
		if t.space && t.b.Len() > 0 {
			last := t.b.String()[t.b.Len()-1]
			if last != '\n' {
				t.b.WriteByte(' ')
			}
		}
		t.space = false
		t.b.WriteRune(r)
	}
}

func (t *inlineText) lineBreak() {
	if t.b.Len() > 0 {
		t.b.WriteByte('\n')
	}
	t.space = false
}

func (t *inlineText) String() string { return strings.TrimRight(t.b.String(), "\n") }
