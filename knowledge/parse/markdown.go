package parse

import (
	"bytes"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
	"unicode/utf8"
)

// markdown reads CommonMark with GitHub's tables (goldmark, its table extension). A
// block's Text is its own source, markers and inline markup included; a heading's
// title, in the heading paths, is its source text without the #s.
//
// goldmark takes time superlinear in some hostile inputs (thousands of list markers
// on one line, unclosed link openers) and pads every table row to its header's
// width, so the source is first cut into segments (markdownSegments) parsed one at a
// time, the context checked between them: a segment's cost is bounded by its size.
// Each segment is parsed alone; a link's reference definition in another segment
// is not resolved, which costs nothing here, since blocks keep their source.
func (p *parser) markdown(body []byte) (*Document, error) {
	s, err := textBody(FormatMarkdown, body)
	if err != nil {
		return nil, err
	}
	segments, err := p.markdownSegments(s)
	if err != nil {
		return nil, err
	}
	md := goldmark.New(goldmark.WithExtensions(extension.Table))
	doc := &Document{}
	var heads headingStack
	for _, seg := range segments {
		if err := p.ctx.Err(); err != nil {
			return nil, err
		}
		src := []byte(seg)
		root := md.Parser().Parse(text.NewReader(src))
		if err := p.markdownBlocks(doc, &heads, root, src); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

func (p *parser) markdownBlocks(doc *Document, heads *headingStack, root ast.Node, src []byte) error {
	for n := root.FirstChild(); n != nil; n = n.NextSibling() {
		if err := p.tick(); err != nil {
			return err
		}
		var b Block
		switch n := n.(type) {
		case *ast.Heading:
			title := strings.TrimSpace(linesText(n, src))
			if doc.Title == "" && n.Level == 1 {
				doc.Title = title
			}
			b = Block{Kind: KindHeading, Level: n.Level, HeadingPath: heads.push(n.Level, title), Text: title}
		case *ast.FencedCodeBlock, *ast.CodeBlock:
			b = Block{Kind: KindCode, HeadingPath: heads.path(), Text: strings.TrimSuffix(linesText(n, src), "\n")}
		case *ast.List:
			b = Block{Kind: KindList, HeadingPath: heads.path(), Text: sourceSpan(n, src)}
		case *extast.Table:
			if err := p.markdownTable(doc, n, src, heads.path()); err != nil {
				return err
			}
			continue
		case *ast.ThematicBreak:
			continue
		default: // paragraphs, block quotes, raw HTML blocks
			b = Block{Kind: KindParagraph, HeadingPath: heads.path(), Text: sourceSpan(n, src)}
		}
		if strings.TrimSpace(b.Text) == "" {
			continue
		}
		if err := p.add(doc, b); err != nil {
			return err
		}
	}
	return nil
}

// Markdown segments and nesting.
const (
	// markdownSegmentBytes is the size past which a segment ends at the next blank
	// line; past twice it, at the next line.
	markdownSegmentBytes = 8 << 10
	// markdownLineBytes is the longest line parsed whole: goldmark scans the rest
	// of the line for each link opener's destination, so a line's cost grows with
	// its square.
	markdownLineBytes = 4 << 10
	// maxMarkdownNesting bounds the block quote and list markers opening one line.
	maxMarkdownNesting = 32
	// markdownCellCost is what a table cell is charged against MaxExpandedBytes.
	markdownCellCost = 64
)

// markdownSegments cuts the source into segments of about markdownSegmentBytes: at a
// blank line, or at any line past twice that size, never inside a fenced
// code block or a table; a line longer than markdownLineBytes is cut at a space
// (or a character boundary) into pieces parsed on their own (a paragraph written as
// one long line comes back as several paragraphs). It refuses a line nesting more than
// maxMarkdownNesting block quotes and lists, and charges each table's cells
// (rows × header width) against MaxExpandedBytes.
func (p *parser) markdownSegments(s string) ([]string, error) {
	var segments []string
	start := 0
	var fence string // the open fence's marker, "" outside one
	tableWidth := 0  // the open table's width, 0 outside one
	prevLine := ""
	for pos := 0; pos < len(s); {
		if err := p.tick(); err != nil {
			return nil, err
		}
		end := strings.IndexByte(s[pos:], '\n')
		next := len(s)
		if end >= 0 {
			next = pos + end + 1
		}
		line := strings.TrimRight(s[pos:next], "\r\n")
		blank := strings.TrimSpace(line) == ""
		switch {
		case fence != "":
			if isFenceClose(line, fence) {
				fence = ""
			}
		case blank:
			tableWidth = 0
		default:
			if marker := fenceOpen(line); marker != "" {
				fence = marker
				break
			}
			if nestingDepth(line) > maxMarkdownNesting {
				return nil, malformed("the Markdown nests block quotes and lists deeper than %d on one line", maxMarkdownNesting)
			}
			if tableWidth == 0 {
				if w := delimiterRowWidth(line); w > 0 && strings.Contains(prevLine, "|") {
					tableWidth = w
					if err := p.spend(int64(2 * w * markdownCellCost)); err != nil {
						return nil, err
					}
				}
			} else if err := p.spend(int64(tableWidth * markdownCellCost)); err != nil {
				return nil, err
			}
		}
		if len(line) > markdownLineBytes && fence == "" {
			// A line too long to parse in one piece: cut it on its own.
			if pos > start {
				segments = append(segments, s[start:pos])
			}
			segments = append(segments, cutLine(s[pos:next], markdownLineBytes)...)
			start = next
		} else if fence == "" && tableWidth == 0 && (blank && next-start >= markdownSegmentBytes || next-start >= 2*markdownSegmentBytes) {
			segments = append(segments, s[start:next])
			start = next
		}
		prevLine = line
		pos = next
	}
	if start < len(s) {
		segments = append(segments, s[start:])
	}
	return segments, nil
}

// fenceOpen is the marker (``` or ~~~, as long as the line has it) of a line opening
// a fenced code block, or "".
func fenceOpen(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || len(t) < 3 || t[0] != '`' && t[0] != '~' {
		return ""
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 || t[0] == '`' && strings.Contains(t[n:], "`") {
		return ""
	}
	return t[:n]
}

func isFenceClose(line, marker string) bool {
	t := strings.TrimSpace(line)
	return len(line)-len(strings.TrimLeft(line, " ")) <= 3 && len(t) >= len(marker) &&
		strings.Trim(t, marker[:1]) == ""
}

// nestingDepth counts the block quote and list markers a line opens with.
func nestingDepth(line string) int {
	depth := 0
	for i := 0; i < len(line); {
		switch c := line[i]; {
		case c == ' ' || c == '\t':
			i++
		case c == '>':
			depth++
			i++
		case (c == '-' || c == '*' || c == '+') && i+1 < len(line) && (line[i+1] == ' ' || line[i+1] == '\t'):
			depth++
			i += 2
		case c >= '0' && c <= '9':
			j := i
			for j < len(line) && j-i < 9 && line[j] >= '0' && line[j] <= '9' {
				j++
			}
			if j+1 < len(line) && (line[j] == '.' || line[j] == ')') && (line[j+1] == ' ' || line[j+1] == '\t') {
				depth++
				i = j + 2
				continue
			}
			return depth
		default:
			return depth
		}
	}
	return depth
}

// delimiterRowWidth is the cell count of a GitHub table's delimiter row (|---|:-:|),
// or 0 when line is not one.
func delimiterRowWidth(line string) int {
	t := strings.TrimSpace(line)
	if !strings.Contains(t, "-") || strings.Trim(t, "|-: \t") != "" {
		return 0
	}
	t = strings.TrimSuffix(strings.TrimPrefix(t, "|"), "|")
	cells := strings.Split(t, "|")
	for _, c := range cells {
		if !strings.Contains(c, "-") {
			return 0
		}
	}
	return len(cells)
}

// cutLine cuts a long line into pieces of at most size bytes, at the last space of
// each piece or else at a character boundary.
func cutLine(line string, size int) []string {
	var out []string
	for len(line) > size {
		cut := strings.LastIndexAny(line[:size], " \t") + 1 // after the space
		if cut <= 0 {
			cut = size
			for cut > 1 && !utf8.RuneStart(line[cut]) {
				cut--
			}
		}
		out = append(out, line[:cut])
		line = line[cut:]
	}
	return append(out, line)
}

func (p *parser) markdownTable(doc *Document, t *extast.Table, src []byte, path []string) error {
	var header []string
	var rows [][]string
	for r := t.FirstChild(); r != nil; r = r.NextSibling() {
		var cells []string
		for c := r.FirstChild(); c != nil; c = c.NextSibling() {
			cells = append(cells, strings.TrimSpace(linesText(c, src)))
		}
		if _, ok := r.(*extast.TableHeader); ok {
			header = cells
		} else {
			rows = append(rows, cells)
		}
	}
	name := ""
	if len(path) > 0 {
		name = path[len(path)-1]
	}
	return p.addTable(doc, path, name, header, rows)
}

// linesText is a block's own lines, joined as the source has them.
func linesText(n ast.Node, src []byte) string {
	var b strings.Builder
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		b.Write(seg.Value(src))
	}
	return b.String()
}

// sourceSpan is the source of a block and everything in it: from the start of the
// line its first text is on to the end of its last text, line break dropped.
func sourceSpan(n ast.Node, src []byte) string {
	start, stop := len(src), 0
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		if c.Type() == ast.TypeBlock {
			lines := c.Lines()
			for i := 0; i < lines.Len(); i++ {
				seg := lines.At(i)
				start, stop = min(start, seg.Start), max(stop, seg.Stop)
			}
		} else if t, ok := c.(*ast.Text); ok {
			start, stop = min(start, t.Segment.Start), max(stop, t.Segment.Stop)
		}
		return ast.WalkContinue, nil
	})
	if start >= stop {
		return ""
	}
	start = bytes.LastIndexByte(src[:start], '\n') + 1
	return strings.TrimRight(string(src[start:stop]), "\r\n")
}
