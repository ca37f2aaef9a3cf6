// Package embed turns memory text into vectors. Vectors are always returned
// L2-normalised, so the cosine of two of them is their dot product and the
// stores never have to normalise.
package embed

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/loomplane/loom/internal/config"
)

// Embedder maps texts to vectors of Dim() entries, one per text, in order.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model names the model and its settings; vectors of different models
	// must never be compared, so stores key them by it.
	Model() string
	Dim() int
}

// New builds the embedder the configuration's section names: hash (the default when
// Kind is empty) or openai, both of cfg.Dim dimensions.
func New(cfg config.Embedder) (Embedder, error) {
	switch strings.ToLower(strings.TrimSpace(cfg.Kind)) {
	case "", "hash":
		return NewHash(cfg.Dim), nil
	case "openai":
		return NewOpenAI(OpenAIConfig{BaseURL: cfg.OpenAI.BaseURL, APIKey: cfg.OpenAI.APIKey, Model: cfg.OpenAI.Model, Dim: cfg.Dim})
	default:
		return nil, fmt.Errorf("embed: unknown embedder kind %q (want \"hash\" or \"openai\")", cfg.Kind)
	}
}

// Remote reports whether e answers over the network: a call then takes a round trip,
// long enough for a caller to overlap it with other work, where the in-process hash
// embedder answers in microseconds.
func Remote(e Embedder) bool {
	_, ok := e.(*OpenAI)
	return ok
}

// Normalize scales v in place to unit L2 norm. A zero vector is left as it
// is: it has no direction, and dividing would make it NaN.
func Normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
}

// Dot is the dot product of a and b, which for normalised vectors is their
// cosine. Vectors of different lengths come from different models and are
// not comparable, so they score 0 (unrelated) rather than a misleading
// partial sum.
func Dot(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	var sum float64
	for i := range a {
		sum += float64(a[i]) * float64(b[i])
	}
	return sum
}
