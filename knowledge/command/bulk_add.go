package command

import (
	"context"
	"fmt"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/knowledge/store"
)

// BulkAddRequest is knowledge.bulk_add's body.
type BulkAddRequest struct {
	Documents []DocumentInput `json:"documents"`
}

// BulkAddAnswer is what a bulk add committed, in the request's order.
type BulkAddAnswer struct {
	Documents []Written `json:"documents"`
}

// bulkAdd is knowledge.bulk_add: every document a new version of its source, in one
// commit. A request naming a source twice, or holding a document the parser refuses,
// is refused before anything is written; a head that moved refuses the whole commit.
func (s *Service) bulkAdd(ctx context.Context, p auth.Principal, ns string, req *BulkAddRequest, hold *idempotency.Hold) (*BulkAddAnswer, error) {
	if err := mayWrite(p); err != nil {
		return nil, err
	}
	switch {
	case len(req.Documents) == 0:
		return nil, httperr.Validation("documents", "documents must hold at least one document")
	case len(req.Documents) > MaxBulk:
		return nil, httperr.Validation("documents", fmt.Sprintf("at most %d documents a request", MaxBulk))
	}
	seen := map[string]int{}
	for i, in := range req.Documents {
		if j, dup := seen[in.SourceURI]; dup {
			return nil, httperr.Validation(fmt.Sprintf("documents[%d].source_uri", i),
				fmt.Sprintf("source %q is named twice (documents[%d] and [%d]): one commit writes a source once", in.SourceURI, j, i))
		}
		seen[in.SourceURI] = i
	}
	plans := make([]*plan, len(req.Documents))
	uris := make([]string, len(req.Documents))
	docs := make([]*prepared, len(req.Documents))
	for i := range req.Documents {
		d, err := s.parseInput(ctx, p, fmt.Sprintf("documents[%d].", i), &req.Documents[i])
		if err != nil {
			return nil, err
		}
		docs[i], plans[i], uris[i] = d, &plan{op: "knowledge.bulk_add", event: events.TypeDocumentWritten, uri: d.uri, user: d.user, doc: d}, d.uri
	}
	// Every document parsed before any is embedded, and all of them in one call.
	if err := s.embed(ctx, docs...); err != nil {
		return nil, err
	}
	versions, err := s.headVersions(ctx, p.Org, ns, uris)
	if err != nil {
		return nil, err
	}
	for _, pl := range plans {
		pl.read = versions[pl.uri]
		if pl.doc.expected != nil {
			pl.read = *pl.doc.expected
		}
	}
	w, err := s.commitWith(ctx, p, ns, plans, guardOf(hold, func(w []Written) any { return &BulkAddAnswer{Documents: w} }))
	if err != nil {
		return nil, err
	}
	return &BulkAddAnswer{Documents: w}, nil
}

// headVersions reads the versions of uris' heads (absent: none).
func (s *Service) headVersions(ctx context.Context, org, ns string, uris []string) (map[string]int64, error) {
	serving, err := store.ReadServing(ctx, s.pool, org, ns, uris, store.Users{})
	if err != nil {
		return nil, httperr.Store("reading the documents' heads", err)
	}
	out := make(map[string]int64, len(serving))
	for uri, sv := range serving {
		out[uri] = sv.Version
	}
	return out, nil
}
