package query

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/knowledge/store"
)

// Document is a source's head as knowledge.get answers it.
type Document struct {
	SourceURI   string            `json:"source_uri"`
	DocID       string            `json:"doc_id"`
	Version     int64             `json:"version"`
	VersionText string            `json:"version_text"`
	Revision    int64             `json:"revision"`
	Format      string            `json:"format"`
	Deleted     bool              `json:"deleted"`
	Title       string            `json:"title"`
	ContentType string            `json:"content_type,omitempty"`
	Tags        []string          `json:"tags"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// Content is the document as uploaded when it is UTF-8 text; ContentBase64 holds
	// it otherwise (a PDF, a spreadsheet).
	Content       *string `json:"content,omitempty"`
	ContentBase64 string  `json:"content_base64,omitempty"`
	Bytes         int64   `json:"bytes"`
	ChunkCount    int     `json:"chunk_count"`
	// UserID is the user the document was written for (absent: the namespace's).
	UserID    string    `json:"user_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func documentOf(h *store.Head, withContent bool) Document {
	d := Document{SourceURI: h.SourceURI, DocID: h.DocID, Version: h.Version, VersionText: strconv.FormatInt(h.Version, 10), Revision: h.Seq, Format: h.Format, Deleted: h.Deleted,
		Bytes: h.Bytes, ChunkCount: h.ChunkCount, UserID: h.UserID, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt, Tags: []string{}}
	if t := h.Text; t != nil {
		d.Title, d.ContentType, d.Metadata = t.Title, t.ContentType, t.Metadata
		if t.Tags != nil {
			d.Tags = t.Tags
		}
		if withContent {
			if utf8.Valid(t.Body) {
				s := string(t.Body)
				d.Content = &s
			} else {
				d.ContentBase64 = base64.StdEncoding.EncodeToString(t.Body)
			}
		}
	}
	return d
}

// readUsers is whose documents a read sees (store.Users): a token bound to a user
// sees the namespace's documents and its user's, another user's being absent to it
// (one it names sees the namespace's alone); an unbound token sees every document, or,
// naming a user, the namespace's and that user's: the view that user's bound token
// has, as memory.search's user_id narrows it. "-" names no user.
func readUsers(p auth.Principal, requested string) store.Users {
	if requested == memrow.DefaultIdentity {
		requested = ""
	}
	switch {
	case p.ReadUserID == "" && requested == "":
		return store.Users{}
	case p.ReadUserID == "":
		return store.Users{Scoped: true, User: requested}
	case requested != "" && requested != p.ReadUserID:
		return store.Users{Scoped: true}
	}
	return store.Users{Scoped: true, User: p.ReadUserID}
}

// head reads a source's head from Postgres: 404 when it has none, is deleted and
// deleted heads are not asked for, or is another user's than the token's.
func (s *Service) head(ctx context.Context, p auth.Principal, ns, uri string, includeDeleted bool) (*store.Head, error) {
	if uri == "" {
		return nil, httperr.Validation("source_uri", "source_uri is required")
	}
	h, err := store.Read(ctx, s.pool, p.Org, ns, uri)
	if err == store.ErrNoHead || (err == nil && ((h.Deleted && !includeDeleted) || !readUsers(p, "").Sees(h.UserID))) {
		return nil, (&httperr.Error{Status: http.StatusNotFound, Code: httperr.CodeNotFound,
			Message: fmt.Sprintf("%q has no document", uri)}).With("source_uri", uri)
	}
	if err != nil {
		return nil, httperr.Store("reading the document's head", err)
	}
	return h, nil
}

// get is knowledge.get: the source's head, its content included.
func (s *Service) get(ctx context.Context, p auth.Principal, ns, uri string, includeDeleted bool) (*Document, error) {
	h, err := s.head(ctx, p, ns, uri, includeDeleted)
	if err != nil {
		return nil, err
	}
	d := documentOf(h, true)
	return &d, nil
}
