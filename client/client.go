// Package client is a typed Go client of Loom's REST API (schemas/openapi.yaml): every
// operation with its request and answer types, the error envelope as *Error, the
// Idempotency-Key header, and, as an option, retry of retryable errors with backoff.
//
// It imports nothing of the server, like package events: a program outside this
// module uses it as it is.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	// Answers decode as encoding/json decodes them (a drop-in tested against it), in
	// less CPU: a benchmark's client shares the machine with the server it measures.
	fastjson "github.com/segmentio/encoding/json"
)

// Client calls one Loom server as one token. It is safe for concurrent use.
type Client struct {
	base   string
	token  string
	http   *http.Client
	retry  *Retry
	strict bool
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc (default: a client with a 60 s timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetry retries retryable errors as r says (see Retry). Without it a call is sent once.
func WithRetry(r Retry) Option { return func(c *Client) { c.retry = &r } }

// WithStrictDecoding refuses an answer holding a field the client's types do not name:
// for a test that keeps this package and the server in step.
func WithStrictDecoding() Option { return func(c *Client) { c.strict = true } }

// New returns a client of the server at baseURL (for example http://localhost:8080)
// acting as token (a `loom_…` secret).
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("loom client: base URL %q is not an http(s) URL", baseURL)
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: &http.Client{Timeout: 60 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// BaseURL is the server's base URL as given to New, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// WithToken returns a client of the same server and options acting as another token.
func (c *Client) WithToken(token string) *Client {
	cc := *c
	cc.token = token
	return &cc
}

// With returns a client of the same server and token with opts applied over c's own
// (for example a retry policy of its own for one use of a shared client).
func (c *Client) With(opts ...Option) *Client {
	cc := *c
	for _, o := range opts {
		o(&cc)
	}
	return &cc
}

// CallOption sets something on one call.
type CallOption func(*call)

// IdempotencyKey sends the Idempotency-Key header: a retry with the same key is answered
// once and never writes twice. Honoured by every memory write.
func IdempotencyKey(key string) CallOption { return func(c *call) { c.idemKey = key } }

// RequestID sends X-Request-Id, recorded in the audit rows and events of the revisions.
func RequestID(id string) CallOption { return func(c *call) { c.requestID = id } }

// call is one request as the client sends it.
type call struct {
	method, path string
	query        url.Values
	body         any    // nil: no body; []byte: sent as is; else JSON-encoded
	contentType  string // the body's; "" is application/json
	write        bool
	idemKey      string
	requestID    string
}

// answer is a 2xx answer read in full.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (c *Client) newCall(method, path string, opts []CallOption) *call {
	k := &call{method: method, path: path}
	for _, o := range opts {
		o(k)
	}
	return k
}

// do sends k, retrying as the client's Retry says, and returns a 2xx answer or an error:
// *Error for an error answer, a wrapped transport error otherwise.
func (c *Client) do(ctx context.Context, k *call) (*answer, error) {
	var body []byte
	if k.body != nil {
		if b, ok := k.body.([]byte); ok {
			body = b
		} else {
			var err error
			if body, err = json.Marshal(k.body); err != nil {
				return nil, fmt.Errorf("loom client: encode the body of %s %s: %w", k.method, k.path, err)
			}
		}
	}
	if c.retry != nil && k.write && k.idemKey == "" && c.retry.IdempotentWrites {
		k.idemKey = uuid.NewString()
	}
	if c.retry == nil {
		return c.send(ctx, k, body)
	}
	return c.retry.run(ctx, k, func() (*answer, error) { return c.send(ctx, k, body) })
}

func (c *Client) send(ctx context.Context, k *call, body []byte) (*answer, error) {
	u := c.base + k.path
	if len(k.query) > 0 {
		u += "?" + k.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, k.method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("loom client: %s %s: %w", k.method, k.path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		contentType := k.contentType
		if contentType == "" {
			contentType = "application/json"
		}
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if k.idemKey != "" {
		req.Header.Set("Idempotency-Key", k.idemKey)
	}
	if k.requestID != "" {
		req.Header.Set("X-Request-Id", k.requestID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("loom client: %s %s: %w", k.method, k.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("loom client: %s %s: read the answer: %w", k.method, k.path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, errorFrom(resp.StatusCode, resp.Header, b)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// into sends k and decodes a 2xx answer into out.
func (c *Client) into(ctx context.Context, k *call, out any) error {
	a, err := c.do(ctx, k)
	if err != nil {
		return err
	}
	return c.decode(k, a, out)
}

func (c *Client) decode(k *call, a *answer, out any) error {
	// Parsed in place: the answer is in hand, and a Decoder over it would copy it into
	// a buffer of its own (32 KB at least, per answer).
	var flags fastjson.ParseFlags
	if c.strict {
		flags |= fastjson.DisallowUnknownFields
	}
	if _, err := fastjson.Parse(a.body, out, flags); err != nil {
		return fmt.Errorf("loom client: %s %s: decode the answer (%d): %w", k.method, k.path, a.status, err)
	}
	return nil
}

// Replay says how a write under an Idempotency-Key was answered; zero for a fresh answer.
type Replay struct {
	// Replayed is true when the answer is a replay (header Idempotent-Replay: true).
	Replayed bool `json:"-"`
	// Committed is set when the request had committed but its answer was lost: the
	// server answers the revisions that committed instead of the operation's answer, and
	// the answer's other fields are zero.
	Committed *CommittedReplay `json:"-"`
}

func (r *Replay) replay() *Replay { return r }

// CommittedReplay is the answer to a retry whose request committed but whose answer was
// lost (schema IdempotentCommittedReplay).
type CommittedReplay struct {
	IdempotentReplay string              `json:"idempotent_replay"`
	Written          []CommittedRevision `json:"written"`
	MemoryID         string              `json:"memory_id,omitempty"`
	MemoryKey        string              `json:"memory_key,omitempty"`
	Version          int64               `json:"version,omitempty"`
	VersionText      string              `json:"version_text,omitempty"`
	ContentSHA256    string              `json:"content_sha256,omitempty"`
}

// CommittedRevision is one revision an idempotent request committed.
type CommittedRevision struct {
	MemoryID      string `json:"memory_id"`
	MemoryKey     string `json:"memory_key"`
	Version       int64  `json:"version"`
	VersionText   string `json:"version_text"`
	ContentSHA256 string `json:"content_sha256"`
}

type replayer interface{ replay() *Replay }

// write sends a memory write and decodes its answer, or the committed replay that
// stands in for it, into out.
func (c *Client) write(ctx context.Context, k *call, out replayer) error {
	k.write = true
	a, err := c.do(ctx, k)
	if err != nil {
		return err
	}
	r := out.replay()
	r.Replayed = a.header.Get("Idempotent-Replay") == "true"
	if r.Replayed && bytes.Contains(a.body, []byte(`"idempotent_replay"`)) {
		var cr CommittedReplay
		if err := c.decode(k, a, &cr); err != nil {
			return err
		}
		if cr.IdempotentReplay == "committed" {
			r.Committed = &cr
			return nil
		}
	}
	return c.decode(k, a, out)
}

// Identity names a memory's agent, user and session within its namespace; empty
// fields are the server's default `"-"` (a user-bound token's user for UserID).
type Identity struct {
	Agent     string `json:"agent,omitempty"`
	UserID    string `json:"user_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

func (id Identity) query(q url.Values) url.Values {
	if q == nil {
		q = url.Values{}
	}
	for _, kv := range [][2]string{{"agent", id.Agent}, {"user_id", id.UserID}, {"session_id", id.SessionID}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	return q
}

// nsPath is /v1/namespaces/{ns} with the name escaped.
func nsPath(ns string) string { return "/v1/namespaces/" + url.PathEscape(ns) }

// keyPath is a memory's path; the key is percent-encoded with its `/` and `:` escaped,
// so a custom method after it (`:pin`) splits at the right colon.
func keyPath(ns, key string) string {
	return nsPath(ns) + "/memories/" + strings.ReplaceAll(url.PathEscape(key), ":", "%3A")
}
