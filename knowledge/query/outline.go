package query

import (
	"context"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/knowledge/store"
)

// Outline is a document's structure: its headings in order, with their levels and
// the path of headings above each.
type Outline struct {
	SourceURI  string          `json:"source_uri"`
	DocID      string          `json:"doc_id"`
	Version    int64           `json:"version"`
	Title      string          `json:"title"`
	Format     string          `json:"format"`
	Headings   []store.Heading `json:"headings"`
	Blocks     int             `json:"blocks"`
	ChunkCount int             `json:"chunk_count"`
}

// outline is knowledge.outline: read from the head itself, so it is the head's and
// fails closed (503 POSTGRES_UNAVAILABLE) when the heads cannot be read.
func (s *Service) outline(ctx context.Context, p auth.Principal, ns, uri string) (*Outline, error) {
	h, err := s.head(ctx, p, ns, uri, false)
	if err != nil {
		return nil, err
	}
	o := &Outline{SourceURI: h.SourceURI, DocID: h.DocID, Version: h.Version, Format: h.Format, ChunkCount: h.ChunkCount,
		Headings: []store.Heading{}}
	if t := h.Text; t != nil {
		o.Title, o.Blocks = t.Title, t.Blocks
		if t.Outline != nil {
			o.Headings = t.Outline
		}
	}
	return o, nil
}
