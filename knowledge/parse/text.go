package parse

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

var utf8BOM = []byte("\xef\xbb\xbf")

// textBody is a text format's body as a string: UTF-8 or refused, a leading
// byte-order mark dropped (it marks the encoding, it is not text).
func textBody(format string, body []byte) (string, error) {
	body = bytes.TrimPrefix(body, utf8BOM)
	if !utf8.Valid(body) {
		return "", malformed("the %s document is not UTF-8 text", format)
	}
	return string(body), nil
}

// text reads plain text: a paragraph per run of non-blank lines.
func (p *parser) text(body []byte) (*Document, error) {
	s, err := textBody(FormatText, body)
	if err != nil {
		return nil, err
	}
	doc := &Document{}
	for _, para := range paragraphs(s) {
		if err := p.add(doc, Block{Kind: KindParagraph, Text: para}); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

// paragraphs cuts s at its blank lines (empty or whitespace alone). Each paragraph is
// s's own text from its first line's start to its last line's end, its line breaks
// (\n or \r\n) and inner whitespace as they are.
func paragraphs(s string) []string {
	var out []string
	start := -1 // start of the open paragraph
	end := 0    // end of its last non-blank line, before the line break
	for pos := 0; pos < len(s); {
		next := strings.IndexByte(s[pos:], '\n')
		lineEnd, after := len(s), len(s)
		if next >= 0 {
			lineEnd, after = pos+next, pos+next+1
		}
		content := strings.TrimSuffix(s[pos:lineEnd], "\r")
		if strings.TrimSpace(content) == "" {
			if start >= 0 {
				out = append(out, s[start:end])
				start = -1
			}
		} else {
			if start < 0 {
				start = pos
			}
			end = pos + len(content)
		}
		pos = after
	}
	if start >= 0 {
		out = append(out, s[start:end])
	}
	return out
}
