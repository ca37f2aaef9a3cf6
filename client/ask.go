package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// AskRequest is the body of memory.ask (schema AskRequest): a search's query and
// filters.
type AskRequest struct {
	Query      string   `json:"query"`
	TopK       int      `json:"top_k,omitempty"` // 0: the server's default (8)
	Namespaces []string `json:"namespaces,omitempty"`
	Agent      string   `json:"agent,omitempty"`
	UserID     string   `json:"user_id,omitempty"`
	SessionID  string   `json:"session_id,omitempty"`
	MemoryType string   `json:"memory_type,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	TagsMode   string   `json:"tags_mode,omitempty"`
	Graph      bool     `json:"graph,omitempty"`
}

// Abstain codes of memory.ask besides the search's verdicts.
const (
	AbstainNotAnswered = "pool_does_not_answer" // the model says the memories do not answer
	AbstainUncited     = "no_citation"          // the answer cited no memory of the pool
)

// AskAnswer is what memory.ask answers.
type AskAnswer struct {
	Answer           string     `json:"answer"`
	Abstained        bool       `json:"abstained"`
	AbstainCode      string     `json:"abstain_code,omitempty"`
	Citations        []Citation `json:"citations"`
	CitationsDropped int        `json:"citations_dropped"`
	StaleDropped     int        `json:"stale_dropped"`
	// PendingExtraction: a deferred extraction of the scope is not done yet.
	PendingExtraction bool   `json:"pending_extraction"`
	Model             string `json:"model,omitempty"`
	// Search is the search the answer read; its hits are the pool.
	Search *SearchAnswer `json:"search"`
}

// Citation is a memory of the pool an answer used.
type Citation struct {
	MemoryID  string `json:"memory_id"`
	Namespace string `json:"namespace"`
	MemoryKey string `json:"memory_key"`
}

// Ask answers a question from a namespace's memories, citing them (memory.ask).
func (c *Client) Ask(ctx context.Context, ns string, req AskRequest) (*AskAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/memories:ask", nil)
	k.body = req
	var a AskAnswer
	return &a, c.into(ctx, k, &a)
}

// AskStream is Ask over server-sent events: search is called with the search's answer
// as soon as the server has it (nil: not called), then the answer is returned. An
// error after the stream began comes back as *Error, as any error answer does.
func (c *Client) AskStream(ctx context.Context, ns string, req AskRequest, search func(*SearchAnswer)) (*AskAnswer, error) {
	body, err := json.Marshal(struct {
		AskRequest
		Stream bool `json:"stream"`
	}{req, true})
	if err != nil {
		return nil, fmt.Errorf("loom client: encode the ask: %w", err)
	}
	path := nsPath(ns) + "/memories:ask"
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("loom client: POST %s: %w", path, err)
	}
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("loom client: POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(resp.Body)
		return nil, errorFrom(resp.StatusCode, resp.Header, b)
	}
	var ans *AskAnswer
	err = readEvents(resp.Body, func(event string, data []byte) error {
		switch event {
		case "search":
			if search != nil {
				var s SearchAnswer
				if err := json.Unmarshal(data, &s); err != nil {
					return fmt.Errorf("decode the search event: %w", err)
				}
				search(&s)
			}
		case "answer":
			ans = &AskAnswer{}
			if err := json.Unmarshal(data, ans); err != nil {
				return fmt.Errorf("decode the answer event: %w", err)
			}
		case "error":
			var st struct {
				Status int `json:"status"`
			}
			if json.Unmarshal(data, &st) != nil || st.Status == 0 {
				st.Status = http.StatusBadGateway
			}
			return errorFrom(st.Status, resp.Header, data)
		}
		return nil
	})
	if err != nil {
		if e, ok := AsError(err); ok {
			return nil, e
		}
		return nil, fmt.Errorf("loom client: POST %s: %w", path, err)
	}
	if ans == nil {
		return nil, fmt.Errorf("loom client: POST %s: the stream ended without an answer", path)
	}
	return ans, nil
}

// readEvents reads a server-sent event stream, handing each event's name and data to fn.
func readEvents(r io.Reader, fn func(event string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	event, data := "message", []byte(nil)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != nil {
				if err := fn(event, data); err != nil {
					return err
				}
			}
			event, data = "message", nil
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	return sc.Err()
}
