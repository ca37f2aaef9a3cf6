package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// answer is one HTTP exchange with a replica; err is a transport failure (the
// replica is down or died mid-request), never a status.
type answer struct {
	status int
	body   map[string]any
	raw    []byte
	err    error
}

func (a answer) code() string {
	e, _ := a.body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (a answer) retryable503() bool {
	e, _ := a.body["error"].(map[string]any)
	return a.status == http.StatusServiceUnavailable && e["retryable"] == true
}

// caller talks to the replicas of one role, as a client behind a load balancer does.
type caller struct {
	token string
	http  *http.Client
}

func newCaller(token string) *caller {
	// No keep-alive: a replica killed and restarted on its port leaves no stale
	// connection behind, and each request picks its replica afresh.
	return &caller{token: token, http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

func (c *caller) do(method, url string, body any) answer {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return answer{err: err}
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{status: resp.StatusCode, err: fmt.Errorf("read the answer: %w", err)}
	}
	a := answer{status: resp.StatusCode, raw: raw}
	json.Unmarshal(raw, &a.body)
	return a
}
