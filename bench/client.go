package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// requestTimeout bounds one API call: a call slower than this is a hang, not a sample.
const requestTimeout = 60 * time.Second

// client calls the Loom API as one token, keeping enough idle connections for the
// highest concurrency, so a run measures requests, not TCP handshakes.
type client struct {
	url   string
	token string
	http  *http.Client
}

func newClient(url, token string) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 256
	return &client{url: url, token: token, http: &http.Client{Transport: tr}}
}

// answer is a response read in full.
type answer struct {
	status int
	body   []byte
}

// do sends body (JSON-encoded unless it is nil or already []byte) with the extra
// headers and reads the answer. An error is a transport failure; any HTTP status is
// an answer.
func (c *client) do(ctx context.Context, method, path string, body any, headers ...string) (*answer, error) {
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				return nil, fmt.Errorf("encode the body of %s %s: %w", method, path, err)
			}
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	return &answer{status: resp.StatusCode, body: b}, nil
}

// call is do that wants 200 and decodes the answer into into (when not nil); any other
// status is a *callError named by the status and the error envelope's code.
func (c *client) call(ctx context.Context, method, path string, body, into any, headers ...string) error {
	a, err := c.do(ctx, method, path, body, headers...)
	if err != nil {
		return err
	}
	if a.status != http.StatusOK {
		var env struct {
			Error struct {
				Code      string `json:"code"`
				Retryable bool   `json:"retryable"`
			} `json:"error"`
		}
		json.Unmarshal(a.body, &env)
		return &callError{kind: fmt.Sprintf("%d %s", a.status, env.Error.Code), retryable: env.Error.Retryable}
	}
	if into != nil {
		if err := json.Unmarshal(a.body, into); err != nil {
			return fmt.Errorf("%s %s: answer is not the JSON expected: %w", method, path, err)
		}
	}
	return nil
}
