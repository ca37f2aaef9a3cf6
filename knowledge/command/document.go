package command

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/knowledge/parse"
	"github.com/loomplane/loom/knowledge/store"
)

// DocumentInput is one document a write takes: its source, its content (text in
// content, or any bytes in content_base64) and what describes it.
type DocumentInput struct {
	SourceURI     string  `json:"source_uri"`
	Content       *string `json:"content,omitempty"`
	ContentBase64 string  `json:"content_base64,omitempty"`
	// ContentType says the format (text/plain, text/markdown, text/html,
	// application/pdf, text/csv, …); Name, a file name, says it by extension.
	ContentType string            `json:"content_type,omitempty"`
	Name        string            `json:"name,omitempty"`
	Title       string            `json:"title,omitempty"`
	Tags        []string          `json:"tags,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// ExpectedVersion is the head version the writer read (0: the source has none);
	// absent, the write reads the head itself. A head that moved refuses the commit.
	ExpectedVersion *int64 `json:"expected_version,omitempty"`
	// UserID is the user the document is written for (absent: the namespace's); a
	// token bound to a user writes for that user (user.go).
	UserID string `json:"user_id,omitempty"`
}

// prepared is a document parsed, chunked and embedded, ready for the commit.
type prepared struct {
	uri      string
	user     string // the user it is written for ("" the namespace's)
	expected *int64
	format   string
	text     store.Text
	chunks   []events.DocumentChunk
	model    string
	dim      int
}

// checkSourceURI refuses a source URI Postgres cannot key: empty, too long, not
// UTF-8, or holding a NUL. Every other text of a document is kept exactly.
func checkSourceURI(field, uri string) error {
	switch {
	case strings.TrimSpace(uri) == "":
		return httperr.Validation(field, "source_uri is required")
	case len(uri) > MaxSourceURIBytes:
		return httperr.Validation(field, fmt.Sprintf("source_uri is over %d bytes", MaxSourceURIBytes))
	case !utf8.ValidString(uri) || strings.ContainsRune(uri, 0):
		return httperr.Validation(field, "source_uri holds text Postgres cannot store (not UTF-8, or a NUL character)")
	}
	return nil
}

// body is the document's bytes, from content or content_base64 (exactly one).
func (in *DocumentInput) body(field string) ([]byte, error) {
	switch {
	case in.Content != nil && in.ContentBase64 != "":
		return nil, httperr.Validation(field+"content", "give content or content_base64, not both")
	case in.Content != nil:
		return []byte(*in.Content), nil
	case in.ContentBase64 != "":
		b, err := base64.StdEncoding.DecodeString(in.ContentBase64)
		if err != nil {
			return nil, httperr.Validation(field+"content_base64", "content_base64 is not standard base64")
		}
		return b, nil
	}
	return nil, httperr.Validation(field+"content", "content or content_base64 is required")
}

// contentType is the format the input names: its content type, else text/plain for
// text given in content with no file name.
func (in *DocumentInput) contentType() string {
	if in.ContentType == "" && in.Name == "" && in.Content != nil {
		return "text/plain"
	}
	return in.ContentType
}

// prepare validates, parses, chunks and embeds one input written by p; field prefixes
// the fields it names (documents[3]. in a bulk add).
func (s *Service) prepare(ctx context.Context, p auth.Principal, field string, in *DocumentInput) (*prepared, error) {
	d, err := s.parseInput(ctx, p, field, in)
	if err != nil {
		return nil, err
	}
	if err := s.embed(ctx, d); err != nil {
		return nil, err
	}
	return d, nil
}

// parseInput is prepare short of the chunks' vectors, which embed adds.
func (s *Service) parseInput(ctx context.Context, p auth.Principal, field string, in *DocumentInput) (*prepared, error) {
	if err := checkSourceURI(field+"source_uri", in.SourceURI); err != nil {
		return nil, err
	}
	user, err := documentUser(p, field+"user_id", in.UserID)
	if err != nil {
		return nil, err
	}
	if len(in.Tags) > MaxTags {
		return nil, httperr.Validation(field+"tags", fmt.Sprintf("at most %d tags", MaxTags))
	}
	if in.ExpectedVersion != nil && *in.ExpectedVersion < 0 {
		return nil, httperr.Validation(field+"expected_version", "expected_version is the version read, 0 for none")
	}
	body, err := in.body(field)
	if err != nil {
		return nil, err
	}
	d, err := s.parseBody(ctx, field, in, body)
	if err != nil {
		return nil, err
	}
	d.user = user
	return d, nil
}

// parseBody parses and chunks a document's bytes (read already): the chunks' vectors
// are embed's (for many documents in one call to the embedder).
func (s *Service) parseBody(ctx context.Context, field string, in *DocumentInput, body []byte) (*prepared, error) {
	if len(body) > MaxDocumentBytes {
		return nil, parseRefusal(field+"content", &parse.ParseError{Code: CodeTooLarge,
			Message: fmt.Sprintf("the document is %d bytes, over the limit of %d", len(body), MaxDocumentBytes)})
	}
	name := in.Name
	if name == "" {
		name = in.SourceURI
	}
	doc, err := parse.Parse(ctx, name, in.contentType(), body, s.limits)
	if err != nil {
		return nil, parseRefusal(field+"content", err)
	}
	p := &prepared{uri: in.SourceURI, expected: in.ExpectedVersion, format: doc.Format,
		text: store.Text{Title: in.Title, ContentType: in.ContentType, Tags: nonNil(in.Tags), Metadata: in.Metadata, Body: body,
			Blocks: len(doc.Blocks)}}
	if p.text.Title == "" {
		p.text.Title = doc.Title
	}
	for _, b := range doc.Blocks {
		if b.Kind == "heading" {
			p.text.Outline = append(p.text.Outline, store.Heading{Level: b.Level, Title: b.Text, Path: b.HeadingPath})
		}
	}
	for i, c := range parse.Chunks(doc, parse.ChunkOptions{MaxTokens: ChunkTokens, OverlapTokens: ChunkOverlap}) {
		p.chunks = append(p.chunks, events.DocumentChunk{Ordinal: i, HeadingPath: c.HeadingPath, Kind: c.Kind, Text: c.Text})
	}
	return p, nil
}

// embed sets the vectors of docs' chunks in one call to the embedder (which sends
// them in batches of its own size), so a run of many small documents costs a few
// calls, not one a document.
func (s *Service) embed(ctx context.Context, docs ...*prepared) error {
	var texts []string
	for _, d := range docs {
		for _, c := range d.chunks {
			texts = append(texts, c.Text)
		}
	}
	var vecs [][]float32
	if len(texts) > 0 {
		var err error
		if vecs, err = s.embedder.Embed(ctx, texts); err != nil {
			return httperr.Unavailable(httperr.CodeEmbedderDown, "the embedder is unavailable while embedding the document's chunks; retry", err)
		}
		if len(vecs) != len(texts) {
			return httperr.Unavailable(httperr.CodeEmbedderDown, "the embedder answered a vector count other than the chunks'; retry",
				fmt.Errorf("embed: %d vectors for %d texts", len(vecs), len(texts)))
		}
	}
	for _, d := range docs {
		d.model, d.dim = s.embedder.Model(), s.embedder.Dim()
		for i := range d.chunks {
			d.chunks[i].Embedding, vecs = vecs[0], vecs[1:]
		}
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
