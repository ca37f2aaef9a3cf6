package mcp

import (
	"context"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

type knowledgeSearchArgs struct {
	Namespace     string   `json:"namespace" jsonschema:"The namespace whose documents to search."`
	Query         string   `json:"query" jsonschema:"What you want to find in the team's documents, in words."`
	Limit         int      `json:"limit,omitempty" jsonschema:"How many chunks at most (default 10, up to 100)."`
	SourcePrefix  string   `json:"source_prefix,omitempty" jsonschema:"Only documents whose source URI starts with this: 'handbook/'."`
	Formats       []string `json:"formats,omitempty" jsonschema:"Only documents of these formats (text, markdown, html, pdf, csv, xlsx)."`
	Tags          []string `json:"tags,omitempty" jsonschema:"Only documents carrying every one of these tags."`
	UpdatedAfter  string   `json:"updated_after,omitempty" jsonschema:"Only documents whose version was written after this time (RFC 3339: 2026-03-01T00:00:00Z)."`
	UpdatedBefore string   `json:"updated_before,omitempty" jsonschema:"Only documents whose version was written before this time (RFC 3339)."`
	UserID        string   `json:"user_id,omitempty" jsonschema:"Only the namespace's documents and this user's."`
}

// request is the search the arguments ask for.
func (in knowledgeSearchArgs) request() (client.KnowledgeSearchRequest, error) {
	req := client.KnowledgeSearchRequest{Query: in.Query, Limit: in.Limit, SourcePrefix: in.SourcePrefix, Formats: in.Formats, Tags: in.Tags,
		UserID: in.UserID}
	for _, b := range []struct {
		field, value string
		into         **time.Time
	}{{"updated_after", in.UpdatedAfter, &req.UpdatedAfter}, {"updated_before", in.UpdatedBefore, &req.UpdatedBefore}} {
		if b.value == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, b.value)
		if err != nil {
			return req, fmt.Errorf("%s is not an RFC 3339 time (2026-03-01T00:00:00Z): %q", b.field, b.value)
		}
		*b.into = &t
	}
	return req, nil
}

type knowledgeAddArgs struct {
	Namespace   string            `json:"namespace" jsonschema:"The namespace the document belongs to."`
	SourceURI   string            `json:"source_uri" jsonschema:"Where the document comes from; one source holds one document, versioned: 'handbook/expenses.md'."`
	Content     string            `json:"content" jsonschema:"The document's text."`
	ContentType string            `json:"content_type,omitempty" jsonschema:"Its format: text/plain (the default), text/markdown, text/html, text/csv."`
	Title       string            `json:"title,omitempty" jsonschema:"Its title (default: what the document says)."`
	Tags        []string          `json:"tags,omitempty" jsonschema:"Tags a search can filter on."`
	Metadata    map[string]string `json:"metadata,omitempty" jsonschema:"Anything else to keep with it."`
	UserID      string            `json:"user_id,omitempty" jsonschema:"The user the document is about and for. Leave out for a document of the whole namespace (or, with a token bound to one user, that user's)."`
}

// knowledgeSynthesizeArgs are a search's arguments (the same fields, so the one
// converts to the other), described for a question.
type knowledgeSynthesizeArgs struct {
	Namespace     string   `json:"namespace" jsonschema:"The namespace whose documents answer."`
	Query         string   `json:"query" jsonschema:"The question, in words: 'how are long flights booked?'."`
	Limit         int      `json:"limit,omitempty" jsonschema:"How many passages the answer may read at most (default 8)."`
	SourcePrefix  string   `json:"source_prefix,omitempty" jsonschema:"Only documents whose source URI starts with this: 'handbook/'."`
	Formats       []string `json:"formats,omitempty" jsonschema:"Only documents of these formats (text, markdown, html, pdf, csv, xlsx)."`
	Tags          []string `json:"tags,omitempty" jsonschema:"Only documents carrying every one of these tags."`
	UpdatedAfter  string   `json:"updated_after,omitempty" jsonschema:"Only documents whose version was written after this time (RFC 3339: 2026-03-01T00:00:00Z)."`
	UpdatedBefore string   `json:"updated_before,omitempty" jsonschema:"Only documents whose version was written before this time (RFC 3339)."`
	UserID        string   `json:"user_id,omitempty" jsonschema:"Only the namespace's documents and this user's."`
}

// addKnowledgeTools registers knowledge_search, knowledge_add and knowledge_synthesize:
// the team's documents beside the memories.
func addKnowledgeTools(s *sdk.Server, c *client.Client) {
	register(s, c, tool[knowledgeSearchArgs]{
		name: "knowledge_search", title: "Search documents", readOnly: true,
		description: "Search a namespace's documents (handbooks, specs, tickets: what the team wrote down, not what " +
			"was said) by meaning and words, best first. Each hit is a chunk of a document: its `source_uri`, `title`, " +
			"`heading_path` and `text`. Every document written before the search is searched; a deleted one never is.",
		out: client.KnowledgeSearchAnswer{},
		run: func(ctx context.Context, c *client.Client, in knowledgeSearchArgs) (any, string, error) {
			req, err := in.request()
			if err != nil {
				return nil, "", err
			}
			a, err := c.SearchKnowledge(ctx, in.Namespace, req)
			if err != nil {
				return nil, "", err
			}
			if len(a.Hits) == 0 {
				return a, "no document matched", nil
			}
			return a, fmt.Sprintf("%d chunk(s); best from %s", len(a.Hits), a.Hits[0].SourceURI), nil
		},
	})
	register(s, c, tool[knowledgeAddArgs]{
		name: "knowledge_add", title: "Add a document",
		description: "Add a document to a namespace's knowledge: a new version of its source (the first, or the next). " +
			"It is chunked along its structure, embedded, and searchable by knowledge_search once the answer comes back.",
		out: client.DocumentWritten{},
		run: func(ctx context.Context, c *client.Client, in knowledgeAddArgs) (any, string, error) {
			a, err := c.AddDocument(ctx, in.Namespace, client.DocumentInput{SourceURI: in.SourceURI, Content: client.Text(in.Content),
				ContentType: in.ContentType, Title: in.Title, Tags: in.Tags, Metadata: in.Metadata, UserID: in.UserID})
			if err != nil {
				return nil, "", err
			}
			return a, fmt.Sprintf("%s version %s: %d chunk(s)", a.SourceURI, a.VersionText, a.ChunkCount), nil
		},
	})
	register(s, c, tool[knowledgeSynthesizeArgs]{
		name: "knowledge_synthesize", title: "Answer from documents", readOnly: true,
		description: "Answer a question from a namespace's documents alone, in one model call: the `answer`, and the " +
			"`citations` (`k:<doc_id>@<version>#<chunk>`, with each passage's `source_uri`) it used. When the documents " +
			"do not answer, `abstained` is true with an `abstain_code`, and there is no answer to use.",
		out: client.Synthesis{},
		run: func(ctx context.Context, c *client.Client, in knowledgeSynthesizeArgs) (any, string, error) {
			req, err := knowledgeSearchArgs(in).request()
			if err != nil {
				return nil, "", err
			}
			a, err := c.Synthesize(ctx, in.Namespace, req)
			if err != nil {
				return nil, "", err
			}
			if a.Abstained {
				return a, "abstained (" + a.AbstainCode + "): the documents do not answer", nil
			}
			return a, fmt.Sprintf("%s (%d citation(s))", a.Answer, len(a.Citations)), nil
		},
	})
}
