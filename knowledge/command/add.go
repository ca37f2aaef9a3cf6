package command

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strconv"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/knowledge/store"
)

// add is knowledge.add: a new version of the source, its first or the next over its
// head. upsert is knowledge.upsert: the same, but a source whose head already holds
// this content and description answers its head, unchanged, and commits nothing.
func (s *Service) add(ctx context.Context, p auth.Principal, ns string, in *DocumentInput, upsert bool, hold *idempotency.Hold) (*Written, error) {
	if err := mayWrite(p); err != nil {
		return nil, err
	}
	d, err := s.prepare(ctx, p, "", in)
	if err != nil {
		return nil, err
	}
	op := "knowledge.add"
	if upsert {
		op = "knowledge.upsert"
	}
	pl := &plan{op: op, event: events.TypeDocumentWritten, uri: d.uri, user: d.user, doc: d}
	head, err := s.readHead(ctx, p.Org, ns, d.uri)
	if err != nil {
		return nil, err
	}
	if head != nil {
		if head.UserID != d.user {
			return nil, sourceTaken(d.uri)
		}
		pl.read = head.Version
		if upsert && !head.Deleted && sameDocument(head.Text, &d.text) && (d.expected == nil || *d.expected == head.Version) {
			return &Written{SourceURI: head.SourceURI, DocID: head.DocID, Version: head.Version, VersionText: strconv.FormatInt(head.Version, 10), Revision: head.Seq,
				Format: head.Format, ChunkCount: head.ChunkCount, Bytes: head.Bytes, UserID: head.UserID, Unchanged: true}, nil
		}
	}
	if d.expected != nil {
		pl.read = *d.expected
	}
	w, err := s.commitWith(ctx, p, ns, []*plan{pl}, guardOf(hold, func(w []Written) any { return &w[0] }))
	if err != nil {
		return nil, err
	}
	return &w[0], nil
}

// sameDocument reports whether a head's text is the new one's.
func sameDocument(a, b *store.Text) bool {
	return a != nil && bytes.Equal(a.Body, b.Body) && a.Title == b.Title && a.ContentType == b.ContentType &&
		slices.Equal(a.Tags, b.Tags) && maps.Equal(a.Metadata, b.Metadata)
}
