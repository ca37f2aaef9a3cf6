package parse

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ChunkOptions size the chunks in estimated tokens (Tokens).
type ChunkOptions struct {
	MaxTokens     int
	OverlapTokens int
}

// DefaultChunkOptions: 256 tokens a chunk (about 330 model tokens of English), 32 of
// them carried over from the chunk before within a section.
func DefaultChunkOptions() ChunkOptions { return ChunkOptions{MaxTokens: 256, OverlapTokens: 32} }

// Chunk is one search unit of a document.
type Chunk struct {
	Ordinal     int
	HeadingPath []string
	// Kind is the kind its blocks share (paragraph, list, code, row; heading when it
	// holds headings alone), or "mixed". Headings do not count when it holds others.
	Kind string
	Text string
}

// KindMixed is a chunk's kind when its blocks are of several kinds.
const KindMixed = "mixed"

// Chunks cuts a document into chunks along its structure (Go allows no function
// named Chunk beside the type Chunk; internal/text.Chunks is memory's cutter):
//   - a chunk holds the blocks of one section (one heading path): a heading starts a
//     new chunk, its title the chunk's first line; a heading with no text of its own
//     before the next one stays with it;
//   - blocks join (a blank line between) while they fit MaxTokens; the next chunk of
//     the same section starts with the last OverlapTokens of the one before;
//   - a block longer than MaxTokens is cut at token boundaries into windows that
//     overlap by OverlapTokens;
//   - a table's rows are chunked apart from the prose, whole rows under the table's
//     header line (its columns joined by " | "), with no overlap: each chunk reads as
//     a table on its own; headings with no text of their own above a table title its
//     first chunk.
//
// Texts are slices of the blocks' own text: nothing is rewritten. A zero MaxTokens
// takes DefaultChunkOptions; OverlapTokens is held under half of MaxTokens.
func Chunks(doc *Document, opt ChunkOptions) []Chunk {
	if opt.MaxTokens <= 0 {
		opt = DefaultChunkOptions()
	}
	opt.OverlapTokens = max(0, min(opt.OverlapTokens, (opt.MaxTokens-1)/2))
	c := &chunker{opt: opt}
	blocks := doc.Blocks
	for i := 0; i < len(blocks); {
		b := blocks[i]
		if b.Kind != KindRow {
			c.prose(b)
			i++
			continue
		}
		j := i + 1
		for j < len(blocks) && blocks[j].Kind == KindRow && blocks[j].Level == b.Level {
			j++
		}
		title := c.takeHeadings(b.HeadingPath)
		c.flush(false)
		header := ""
		if b.Level >= 1 && b.Level <= len(doc.Tables) {
			header = strings.Join(doc.Tables[b.Level-1].Columns, rowSeparator)
		}
		c.rows(title, header, blocks[i:j])
		i = j
	}
	c.flush(false)
	return c.out
}

type chunker struct {
	opt ChunkOptions
	out []Chunk

	// the chunk being filled
	parts  []string
	tokens int
	path   []string
	kinds  []string // the kinds of its blocks, headings apart
	heads  bool     // it holds a heading
	fresh  bool     // it holds more than the overlap carried into it
}

func (c *chunker) prose(b Block) {
	if b.Kind == KindHeading {
		if len(c.kinds) > 0 {
			c.flush(false)
		}
		c.dropCarry()
		c.parts = append(c.parts, b.Text)
		c.tokens += Tokens(b.Text)
		c.path, c.heads, c.fresh = b.HeadingPath, true, true
		return
	}
	if !slices.Equal(b.HeadingPath, c.path) {
		c.flush(false) // a new section without a heading of its own (a PDF's page)
	}
	if !c.fresh {
		c.path = b.HeadingPath
	}
	spans := tokenSpans(b.Text)
	if c.tokens+len(spans) > c.opt.MaxTokens && len(c.kinds) > 0 {
		c.flush(true)
	}
	if c.tokens+len(spans) > c.opt.MaxTokens && len(spans) <= c.opt.MaxTokens && !c.fresh {
		c.dropCarry() // it fits alone, not after the overlap
	}
	if c.tokens+len(spans) <= c.opt.MaxTokens {
		c.append(b.Kind, b.Text, len(spans))
		return
	}
	// Longer than a chunk: windows, the first filling what room the overlap or the
	// headings before it left.
	for start := 0; ; {
		room := max(c.opt.MaxTokens-c.tokens, c.opt.MaxTokens/2, c.opt.OverlapTokens+1)
		end := min(len(spans), start+room)
		c.append(b.Kind, b.Text[spans[start][0]:spans[end-1][1]], end-start)
		if end == len(spans) {
			return
		}
		c.flush(false)
		start = end - c.opt.OverlapTokens
	}
}

// takeHeadings takes the chunk being filled when it holds headings alone, the ones
// a table's rows sit under: they title the table's first chunk instead of making
// a chunk of their own.
func (c *chunker) takeHeadings(rowPath []string) string {
	if !c.fresh || len(c.kinds) > 0 || len(rowPath) < len(c.path) || !slices.Equal(rowPath[:len(c.path)], c.path) {
		return ""
	}
	title := strings.Join(c.parts, "\n\n")
	c.parts, c.tokens, c.heads, c.fresh = c.parts[:0], 0, false, false
	return title
}

// rows chunks a run of one table's rows under its header line, the first chunk
// titled by the headings above the table when they hold no text of their own.
func (c *chunker) rows(title, header string, rows []Block) {
	headerTokens := Tokens(header)
	titleTokens := Tokens(title)
	room := max(c.opt.MaxTokens-headerTokens-titleTokens, c.opt.MaxTokens/2, 1)
	var lines []string
	tokens := 0
	path := rows[0].HeadingPath
	emit := func() {
		if len(lines) == 0 {
			return
		}
		text := strings.Join(lines, "\n")
		if header != "" {
			text = header + "\n" + text
		}
		if title != "" {
			text = title + "\n\n" + text
		}
		c.out = append(c.out, Chunk{Ordinal: len(c.out), HeadingPath: slices.Clone(path), Kind: KindRow, Text: text})
		lines, tokens = lines[:0], 0
		if title != "" {
			title, room = "", max(c.opt.MaxTokens-headerTokens, c.opt.MaxTokens/2, 1)
		}
	}
	for _, r := range rows {
		spans := tokenSpans(r.Text)
		if tokens+len(spans) > room {
			emit()
		}
		if len(spans) <= room {
			lines = append(lines, r.Text)
			tokens += len(spans)
			continue
		}
		for start := 0; start < len(spans); {
			end := min(len(spans), start+room)
			lines = append(lines, r.Text[spans[start][0]:spans[end-1][1]])
			emit()
			start = end
		}
	}
	emit()
}

func (c *chunker) append(kind, text string, tokens int) {
	c.parts = append(c.parts, text)
	c.tokens += tokens
	c.fresh = true
	if !slices.Contains(c.kinds, kind) {
		c.kinds = append(c.kinds, kind)
	}
}

// flush emits the chunk being filled, if it holds anything new; with carry, the next
// chunk starts with its last OverlapTokens.
func (c *chunker) flush(carry bool) {
	if !c.fresh {
		c.dropCarry()
		return
	}
	text := strings.Join(c.parts, "\n\n")
	kind := KindHeading
	switch {
	case len(c.kinds) == 1:
		kind = c.kinds[0]
	case len(c.kinds) > 1:
		kind = KindMixed
	}
	c.out = append(c.out, Chunk{Ordinal: len(c.out), HeadingPath: slices.Clone(c.path), Kind: kind, Text: text})
	c.parts, c.tokens, c.kinds, c.heads, c.fresh = c.parts[:0], 0, c.kinds[:0], false, false
	if !carry || c.opt.OverlapTokens == 0 {
		return
	}
	spans := tokenSpans(text)
	if n := min(c.opt.OverlapTokens, len(spans)); n > 0 {
		c.parts = append(c.parts, text[spans[len(spans)-n][0]:])
		c.tokens = n
	}
}

// dropCarry forgets an overlap carried in when nothing was added after it.
func (c *chunker) dropCarry() {
	if !c.fresh {
		c.parts, c.tokens = c.parts[:0], 0
	}
}

// Tokens estimates a text's tokens without a model's tokenizer: a token is a run of
// non-space characters (a word with its punctuation), a run longer than 16
// characters counting a token per 16, and each CJK character (Han, kana, Hangul) a
// token of its own, since those scripts put no spaces between words. English runs
// about 1.3 model tokens to one of these.
func Tokens(s string) int { return len(tokenSpans(s)) }

const maxTokenRunes = 16

// tokenSpans are the byte ranges of s's tokens (Tokens).
func tokenSpans(s string) [][2]int {
	var spans [][2]int
	start, runes := -1, 0
	for i, r := range s {
		switch {
		case unicode.IsSpace(r):
			if start >= 0 {
				spans = append(spans, [2]int{start, i})
				start = -1
			}
		case isCJK(r):
			if start >= 0 {
				spans = append(spans, [2]int{start, i})
				start = -1
			}
			spans = append(spans, [2]int{i, i + utf8.RuneLen(r)})
		default:
			if start >= 0 && runes == maxTokenRunes {
				spans = append(spans, [2]int{start, i})
				start = -1
			}
			if start < 0 {
				start, runes = i, 0
			}
			runes++
		}
	}
	if start >= 0 {
		spans = append(spans, [2]int{start, len(s)})
	}
	return spans
}

func isCJK(r rune) bool {
	return r >= 0x2E80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}
