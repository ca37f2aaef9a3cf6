package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// ErrEmbedderUnavailable marks a failure worth retrying later: the provider
// answered 429 or 5xx, or could not be reached or timed out. The HTTP layer
// maps it to a retryable 503.
var ErrEmbedderUnavailable = errors.New("embedder unavailable")

const (
	defaultBaseURL   = "https://api.openai.com"
	defaultTimeout   = 30 * time.Second
	defaultBatchSize = 256
	// maxErrorBody bounds how much of an error response is read; only its
	// message is reported.
	maxErrorBody = 64 << 10
)

// OpenAIConfig configures an OpenAI-compatible embeddings endpoint.
type OpenAIConfig struct {
	// BaseURL is the server root, e.g. "https://api.openai.com"; requests
	// go to BaseURL + "/v1/embeddings". A BaseURL already ending in "/v1"
	// (the form many SDKs use) is accepted as is. Default: OpenAI.
	BaseURL string
	APIKey  string
	Model   string
	// Dim, when > 0, is sent as "dimensions" and every vector must have it;
	// when 0 the first vector's length is adopted and then enforced.
	Dim int
	// Timeout bounds each request (default 30s).
	Timeout    time.Duration
	HTTPClient *http.Client
	// BatchSize bounds the texts per request (default 256).
	BatchSize int
}

// OpenAI embeds through any OpenAI-compatible POST /v1/embeddings endpoint.
type OpenAI struct {
	cfg      OpenAIConfig
	endpoint string
	client   *http.Client
	// dim is cfg.Dim, or the length learned from the first response; it is
	// read and set concurrently by parallel Embed calls.
	dim atomic.Int64
}

// NewOpenAI validates cfg and fills in its defaults.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("embed: openai embedder needs a model")
	}
	if cfg.Dim < 0 {
		return nil, fmt.Errorf("embed: openai dimension %d is negative", cfg.Dim)
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = defaultBatchSize
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		base = defaultBaseURL
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("embed: openai base URL %q must start with http:// or https://", cfg.BaseURL)
	}
	endpoint := base + "/v1/embeddings"
	if strings.HasSuffix(base, "/v1") {
		endpoint = base + "/embeddings"
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	e := &OpenAI{cfg: cfg, endpoint: endpoint, client: client}
	e.dim.Store(int64(cfg.Dim))
	return e, nil
}

func (e *OpenAI) Model() string { return e.cfg.Model }

// Dim is the configured dimension, or the one learned from the first
// response; 0 until then.
func (e *OpenAI) Dim() int { return int(e.dim.Load()) }

// Embed sends texts in batches of BatchSize and returns one normalised vector
// per text, in input order.
func (e *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	batches := (len(texts) + e.cfg.BatchSize - 1) / e.cfg.BatchSize
	for b := 0; b < batches; b++ {
		lo := b * e.cfg.BatchSize
		hi := min(lo+e.cfg.BatchSize, len(texts))
		vecs, err := e.embedBatch(ctx, texts[lo:hi])
		if err != nil {
			return nil, fmt.Errorf("embed: %s: batch %d of %d (%d texts): %w", e.cfg.Model, b+1, batches, hi-lo, err)
		}
		out = append(out, vecs...)
	}
	return out, nil
}

type embeddingsRequest struct {
	Model      string   `json:"model"`
	Input      []string `json:"input"`
	Dimensions int      `json:"dimensions,omitempty"`
}

type embeddingsResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// errorResponse is the OpenAI error shape; some compatible servers send a
// plain string or a top-level message instead.
type errorResponse struct {
	Error   json.RawMessage `json:"error"`
	Message string          `json:"message"`
}

func (e *OpenAI) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(embeddingsRequest{Model: e.cfg.Model, Input: texts, Dimensions: e.cfg.Dim})
	if err != nil {
		return nil, fmt.Errorf("encoding request: %w", err)
	}
	reqCtx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, e.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.cfg.APIKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up; the provider is not to blame.
			return nil, fmt.Errorf("POST %s: %w", e.endpoint, ctx.Err())
		}
		return nil, fmt.Errorf("POST %s: %w: %w", e.endpoint, ErrEmbedderUnavailable, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		msg := providerMessage(raw)
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			return nil, fmt.Errorf("POST %s: %w: HTTP %d: %s", e.endpoint, ErrEmbedderUnavailable, resp.StatusCode, msg)
		}
		return nil, fmt.Errorf("POST %s: HTTP %d: %s", e.endpoint, resp.StatusCode, msg)
	}

	var parsed embeddingsResponse
	if err := json.NewDecoder(resp.Body).Decode(&parsed); err != nil {
		if ctx.Err() == nil && reqCtx.Err() != nil {
			return nil, fmt.Errorf("reading response: %w: %w", ErrEmbedderUnavailable, err)
		}
		return nil, fmt.Errorf("decoding response: %w", err)
	}
	return e.collect(texts, parsed)
}

// collect puts the vectors back in input order (data[i].index, not the
// position in data, says which input a vector belongs to), checks their
// dimension and normalises them.
func (e *OpenAI) collect(texts []string, parsed embeddingsResponse) ([][]float32, error) {
	if len(parsed.Data) != len(texts) {
		return nil, fmt.Errorf("response has %d embeddings for %d inputs", len(parsed.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range parsed.Data {
		if d.Index < 0 || d.Index >= len(texts) {
			return nil, fmt.Errorf("response has embedding index %d for %d inputs", d.Index, len(texts))
		}
		if out[d.Index] != nil {
			return nil, fmt.Errorf("response has embedding index %d twice", d.Index)
		}
		if len(d.Embedding) == 0 {
			return nil, fmt.Errorf("response has an empty embedding at index %d", d.Index)
		}
		want := int(e.dim.Load())
		if want == 0 {
			// First response of an unconfigured dimension: adopt it, unless
			// a concurrent call adopted another one first.
			if e.dim.CompareAndSwap(0, int64(len(d.Embedding))) {
				want = len(d.Embedding)
			} else {
				want = int(e.dim.Load())
			}
		}
		if len(d.Embedding) != want {
			return nil, fmt.Errorf("embedding %d has %d dimensions, want %d", d.Index, len(d.Embedding), want)
		}
		Normalize(d.Embedding)
		out[d.Index] = d.Embedding
	}
	return out, nil
}

// providerMessage extracts the provider's error message from an error body,
// falling back to the (trimmed) body itself.
func providerMessage(raw []byte) string {
	var er errorResponse
	if json.Unmarshal(raw, &er) == nil {
		var obj struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(er.Error, &obj) == nil && obj.Message != "":
			return obj.Message
		case json.Unmarshal(er.Error, &s) == nil && s != "":
			return s
		case er.Message != "":
			return er.Message
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
