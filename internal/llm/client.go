package llm

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// maxErrorBody bounds how much of an error answer is read; only its message is kept.
const maxErrorBody = 64 << 10

// Endpoint is an OpenAI-compatible API.
type Endpoint struct {
	// BaseURL is the API root: https://api.openai.com/v1, a local Ollama's
	// http://localhost:11434/v1. A URL not ending in /v1 gets it appended, so the
	// server root (https://api.openai.com) reaches the same API.
	BaseURL string
	APIKey  string
	// Timeout bounds one attempt, the answer's body included (0: the caller's
	// context alone).
	Timeout    time.Duration
	HTTPClient *http.Client
}

// Client makes single attempts through the official openai-go client and turns
// every failure into an *Error of the seeds' classes. It never retries: the
// Provider does, and the embedder leaves retries to its callers.
type Client struct {
	chat    openai.ChatCompletionService
	embed   openai.EmbeddingService
	timeout time.Duration
}

// NewClient checks the endpoint and builds its client.
func NewClient(ep Endpoint) (*Client, error) {
	base, err := apiRoot(ep.BaseURL)
	if err != nil {
		return nil, err
	}
	hc := ep.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	// The services are built from these options alone, not through openai.NewClient,
	// which would also read OPENAI_API_KEY, OPENAI_BASE_URL and other variables from
	// the process environment: Loom's settings are the only source.
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithBaseURL(base),
		option.WithAPIKey(ep.APIKey),
		option.WithMaxRetries(0),
		option.WithMiddleware(statusErrors),
	}
	if ep.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(ep.Timeout))
	}
	return &Client{chat: openai.NewChatCompletionService(opts...), embed: openai.NewEmbeddingService(opts...), timeout: ep.Timeout}, nil
}

// apiRoot normalises a base URL to the API root the SDK resolves paths against.
func apiRoot(raw string) (string, error) {
	s := strings.TrimRight(strings.TrimSpace(raw), "/")
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("llm: base URL %q must be an http:// or https:// URL", raw)
	}
	if !strings.HasSuffix(u.Path, "/v1") {
		u.Path += "/v1"
	}
	return u.String() + "/", nil
}

// Chat asks for one chat completion.
func (c *Client) Chat(ctx context.Context, params openai.ChatCompletionNewParams) (*openai.ChatCompletion, error) {
	return send[openai.ChatCompletion](ctx, c, "a chat completion", func(into option.RequestOption) error {
		_, err := c.chat.New(ctx, params, into)
		return err
	})
}

// Embeddings asks for one batch of embeddings, as base64 unless params name a format:
// a vector of little-endian float32s decodes several times faster than its JSON
// numbers, and a server that ignores encoding_format and sends numbers is read as well.
func (c *Client) Embeddings(ctx context.Context, params openai.EmbeddingNewParams) (*EmbeddingList, error) {
	if params.EncodingFormat == "" {
		params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
	}
	return send[EmbeddingList](ctx, c, "an embeddings list", func(into option.RequestOption) error {
		_, err := c.embed.New(ctx, params, into)
		return err
	})
}

// EmbeddingList is an embeddings answer, decoded by encoding/json alone: the SDK's own
// type parses the body twice (encoding/json, then gjson per vector), 84% of the
// client's CPU per call in BenchmarkOpenAIEmbedScripted (internal/embed).
type EmbeddingList struct {
	Data  []Embedding `json:"data"`
	Model string      `json:"model"`
	Usage struct {
		PromptTokens int64 `json:"prompt_tokens"`
	} `json:"usage"`
}

// Embedding is one input's vector.
type Embedding struct {
	Index     int64         `json:"index"`
	Embedding EmbeddingData `json:"embedding"`
}

// EmbeddingData is a vector sent as JSON numbers or as base64 of little-endian float32s.
type EmbeddingData []float32

func (v *EmbeddingData) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '"' {
		return json.Unmarshal(b, (*[]float32)(v))
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("a base64 embedding: %w", err)
	}
	if len(raw)%4 != 0 {
		return fmt.Errorf("a base64 embedding of %d bytes is not float32s", len(raw))
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	*v = out
	return nil
}

// send makes one request and decodes its answer as a T. The SDK hands over the raw
// body (it decodes only bodies labelled JSON, and some compatible servers and
// proxies label theirs otherwise).
func send[T any](ctx context.Context, c *Client, what string, call func(into option.RequestOption) error) (*T, error) {
	var raw []byte
	if err := call(option.WithResponseBodyInto(&raw)); err != nil {
		return nil, c.classify(ctx, err)
	}
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, &Error{Class: ClassMalformed, Message: "the answer is not " + what, Cause: err}
	}
	return &out, nil
}

// classify turns what the SDK returned into an *Error, except the caller's own
// cancellation or deadline, which is the caller's and passes through.
func (c *Client) classify(ctx context.Context, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if ctx.Err() != nil {
		return fmt.Errorf("model call: %w", ctx.Err())
	}
	var api *openai.Error
	if errors.As(err, &api) {
		return &Error{Class: classByStatus(api.StatusCode), Status: api.StatusCode, Message: api.Message}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Class: ClassTransient, Message: fmt.Sprintf("no answer within %s", c.timeout), Cause: err}
	}
	// Anything else failed on the way: no connection, a reset, a body cut short.
	return &Error{Class: ClassTransient, Message: "the provider could not be reached", Cause: err}
}

// statusErrors answers an error status as an *Error before the SDK decodes it: the
// SDK only understands OpenAI's {"error": {...}} shape, and compatible servers also
// send a plain string, a top-level message or an HTML page.
func statusErrors(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	return nil, &Error{Class: classByStatus(res.StatusCode), Status: res.StatusCode, Message: providerMessage(raw),
		RetryAfter: retryAfter(res.Header, time.Now())}
}

// retryAfter reads the provider's wish: retry-after-ms, then Retry-After in seconds
// or as an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// providerMessage extracts the provider's message from an error body: OpenAI's
// {"error": {"message": ...}}, {"error": "..."}, {"message": ...}, or the trimmed
// body itself.
func providerMessage(raw []byte) string {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(raw, &body) == nil {
		var obj struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(body.Error, &obj) == nil && obj.Message != "":
			return obj.Message
		case json.Unmarshal(body.Error, &s) == nil && s != "":
			return s
		case body.Message != "":
			return body.Message
		}
	}
	msg := strings.TrimSpace(string(raw))
	if msg == "" {
		return "(empty response body)"
	}
	const maxLen = 512
	if len(msg) > maxLen {
		cut := maxLen
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}
