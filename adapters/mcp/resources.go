package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

// memoryTemplate names a memory of the default identity; a key holding `/` is sent
// percent-encoded (%2F).
const memoryTemplate = "loom://{namespace}/{key}"

func addResources(s *sdk.Server, c *client.Client) {
	s.AddResourceTemplate(&sdk.ResourceTemplate{
		Name: "memory", Title: "A memory", URITemplate: memoryTemplate, MIMEType: "application/json",
		Description: "The current memory under a key of a namespace (default agent, user and session), as memory_get answers it.",
	}, func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		uri := req.Params.URI
		ns, key, err := parseMemoryURI(uri)
		if err != nil {
			return nil, err
		}
		m, err := c.Get(ctx, ns, key, client.Identity{}, time.Time{})
		if client.IsCode(err, client.CodeNotFound) {
			return nil, sdk.ResourceNotFoundError(uri)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", uri, err)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
	})
}

func parseMemoryURI(uri string) (ns, key string, err error) {
	rest, ok := strings.CutPrefix(uri, "loom://")
	ns, rawKey, found := strings.Cut(rest, "/")
	if !ok || !found || ns == "" || rawKey == "" {
		return "", "", fmt.Errorf("%q is not a memory URI: want %s", uri, memoryTemplate)
	}
	if key, err = url.PathUnescape(rawKey); err != nil {
		return "", "", fmt.Errorf("%q: the key is not percent-encoded: %w", uri, err)
	}
	if err := (keyArgs{Key: key}).check(); err != nil {
		return "", "", fmt.Errorf("%q: %w", uri, err)
	}
	return ns, key, nil
}
