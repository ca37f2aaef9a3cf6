package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/loomplane/loom/events"
)

// contentReader fetches what the topic seals through Loom's REST API
// (GET /v1/memories/{memory_id}), as the token's org, namespaces and read scope allow.
type contentReader struct {
	base    string
	token   string
	client  *http.Client
	timeout time.Duration
}

func newContentReader(base, token string, timeout time.Duration) *contentReader {
	return &contentReader{base: strings.TrimSuffix(base, "/"), token: token, client: &http.Client{}, timeout: timeout}
}

// memory is the part of the API's answer the consumer prints.
type memory struct {
	MemoryKey string          `json:"memory_key"`
	Value     json.RawMessage `json:"value"`
	Version   int64           `json:"version"`
}

// describe fetches the memory's head. The API serves heads, not history: a head
// newer than the event means the event's content has already been replaced.
func (c *contentReader) describe(ctx context.Context, e *events.Envelope) string {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/memories/"+url.PathEscape(e.Revision.MemoryID), nil)
	if err != nil {
		return fmt.Sprintf("content=(cannot ask: %v)", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Sprintf("content=(unavailable: %v)", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Sprintf("content=(unavailable: %v)", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return "content=(gone: deleted, erased, or outside this token's reach)"
	case resp.StatusCode != http.StatusOK:
		return fmt.Sprintf("content=(unavailable: HTTP %d)", resp.StatusCode)
	}
	var m memory
	if err := json.Unmarshal(body, &m); err != nil {
		return fmt.Sprintf("content=(unreadable answer: %v)", err)
	}
	if m.Version != e.Revision.Version {
		return fmt.Sprintf("key=%q content=(superseded: the head is version %d)", m.MemoryKey, m.Version)
	}
	return fmt.Sprintf("key=%q value=%s", m.MemoryKey, m.Value)
}
