package embed

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"unicode"
)

// DefaultHashDim is the Hash dimension when none is configured.
const DefaultHashDim = 384

// Feature weights. Shared words carry most of the similarity; bigrams reward
// shared phrasing; trigrams let inflections ("prefers"/"preferred") and typos
// overlap a little without letting unrelated sentences that share common
// letter runs look alike.
const (
	wordWeight    = 1.0
	bigramWeight  = 0.5
	trigramWeight = 0.35
)

// Hash is the default embedder: deterministic feature hashing of lower-cased
// words, word bigrams and character trigrams. It needs no model download, so
// tests and `loomd dev` get stable vectors offline. It captures lexical
// overlap only, not meaning.
type Hash struct {
	dim int
}

// NewHash returns a Hash embedder of dim dimensions (DefaultHashDim when
// dim <= 0).
func NewHash(dim int) *Hash {
	if dim <= 0 {
		dim = DefaultHashDim
	}
	return &Hash{dim: dim}
}

// Model includes the dimension because vectors of different dimensions are
// different models as far as stored vectors are concerned.
func (h *Hash) Model() string { return fmt.Sprintf("hash-v1-%d", h.dim) }

func (h *Hash) Dim() int { return h.dim }

// Embed never fails except on a cancelled context.
func (h *Hash) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i] = h.embedOne(t)
	}
	return out, nil
}

func (h *Hash) embedOne(text string) []float32 {
	acc := make([]float64, h.dim)
	words := tokenize(text)
	for i, w := range words {
		// Feature kinds get distinct prefixes so the word "ab" and a
		// trigram spelling the same bytes do not share a bucket by design.
		h.add(acc, "w\x00"+w, wordWeight)
		if i > 0 {
			h.add(acc, "b\x00"+words[i-1]+"\x00"+w, bigramWeight)
		}
		padded := []rune("#" + w + "#")
		for j := 0; j+3 <= len(padded); j++ {
			h.add(acc, "t\x00"+string(padded[j:j+3]), trigramWeight)
		}
	}
	v := make([]float32, h.dim)
	for i, x := range acc {
		v[i] = float32(x)
	}
	Normalize(v)
	return v
}

// add hashes a feature into acc. The bucket comes from the low bits and the
// sign from the top bit, so collisions cancel out on average instead of
// piling up.
func (h *Hash) add(acc []float64, feature string, weight float64) {
	f := fnv.New64a()
	f.Write([]byte(feature))
	sum := f.Sum64()
	if sum>>63 == 1 {
		weight = -weight
	}
	acc[sum%uint64(h.dim)] += weight
}

// tokenize lower-cases text and splits it into runs of letters and digits.
func tokenize(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}
