package embed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/loomplane/loom/internal/llm"
)

// ErrEmbedderUnavailable marks a failure worth retrying later: the provider
// answered 408, 409, 429 or 5xx, or could not be reached or timed out (the model
// provider's transient class, internal/llm). The HTTP layer
// maps it to a retryable 503.
var ErrEmbedderUnavailable = errors.New("embedder unavailable")

const (
	defaultBaseURL   = "https://api.openai.com"
	defaultTimeout   = 30 * time.Second
	defaultBatchSize = 256
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

// OpenAI embeds through any OpenAI-compatible POST /v1/embeddings endpoint, with
// the model provider's client (the official openai-go one), one attempt per batch:
// a transient failure is ErrEmbedderUnavailable and its caller's to retry.
type OpenAI struct {
	cfg    OpenAIConfig
	client *llm.Client
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
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = defaultBaseURL
	}
	client, err := llm.NewClient(llm.Endpoint{BaseURL: base, APIKey: cfg.APIKey, Timeout: cfg.Timeout, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("embed: openai: %w", err)
	}
	e := &OpenAI{cfg: cfg, client: client}
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

func (e *OpenAI) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	params := openai.EmbeddingNewParams{Model: e.cfg.Model, Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}}
	if e.cfg.Dim > 0 {
		params.Dimensions = openai.Int(int64(e.cfg.Dim))
	}
	res, err := e.client.Embeddings(ctx, params)
	if errors.Is(err, llm.ErrTransient) {
		return nil, fmt.Errorf("%w: %w", ErrEmbedderUnavailable, err)
	}
	if err != nil {
		return nil, err
	}
	return e.collect(texts, res.Data)
}

// collect puts the vectors in input order, checks their dimension and normalises
// them.
func (e *OpenAI) collect(texts []string, data []llm.Embedding) ([][]float32, error) {
	out, err := llm.Vectors(data, len(texts))
	if err != nil {
		return nil, err
	}
	for i, v := range out {
		want := int(e.dim.Load())
		if want == 0 {
			// First response of an unconfigured dimension: adopt it, unless
			// a concurrent call adopted another one first.
			if e.dim.CompareAndSwap(0, int64(len(v))) {
				want = len(v)
			} else {
				want = int(e.dim.Load())
			}
		}
		if len(v) != want {
			return nil, fmt.Errorf("embedding %d has %d dimensions, want %d", i, len(v), want)
		}
		Normalize(v)
	}
	return out, nil
}
