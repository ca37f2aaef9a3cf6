package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomplane/loom/internal/auth"
	kquery "github.com/loomplane/loom/knowledge/query"
	"github.com/loomplane/loom/query"
)

// knowledgeLayer is context.pack's knowledge layer over the knowledge plane's search:
// the query side reaches the plane only through the interface it defines.
type knowledgeLayer struct{ plane *kquery.Service }

// Knowledge answers the k chunks knowledge.search finds for the query, each citing
// its document version and chunk: k:<doc_id>@<version>#<ordinal> (knowledge.get by
// source_uri shows the version; the outline numbers the chunks).
func (l knowledgeLayer) Knowledge(ctx context.Context, p auth.Principal, ns, userID, q string, k int) ([]query.KnowledgeChunk, error) {
	ans, err := l.plane.Search(ctx, p, ns, kquery.SearchRequest{Query: q, Limit: min(max(k, 1), kquery.MaxSearchLimit), UserID: userID})
	if err != nil {
		return nil, err
	}
	out := make([]query.KnowledgeChunk, 0, len(ans.Hits))
	for _, h := range ans.Hits {
		text := h.Text
		if len(h.HeadingPath) > 0 {
			text = strings.Join(h.HeadingPath, " › ") + ": " + text
		}
		out = append(out, query.KnowledgeChunk{Cite: fmt.Sprintf("k:%s@%d#%d", h.DocID, h.Version, h.Ordinal),
			Text: h.SourceURI + " — " + text, SourceURI: h.SourceURI, DocID: h.DocID, Version: h.Version, Ordinal: h.Ordinal})
	}
	return out, nil
}
