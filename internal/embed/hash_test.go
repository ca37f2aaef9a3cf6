package embed

import (
	"context"
	"math"
	"testing"

	"github.com/loomplane/loom/internal/config"
)

func embedOne(t *testing.T, e Embedder, text string) []float32 {
	t.Helper()
	vs, err := e.Embed(context.Background(), []string{text})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 {
		t.Fatalf("got %d vectors for 1 text", len(vs))
	}
	return vs[0]
}

func norm(v []float32) float64 {
	return math.Sqrt(Dot(v, v))
}

func TestHashDeterministic(t *testing.T) {
	texts := []string{"the user prefers dark mode", "Invoice #42 is due", "日本語のテキスト"}
	a, err := NewHash(0).Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh embedder, and a different batch shape, give the same vectors.
	for i, text := range texts {
		b := embedOne(t, NewHash(0), text)
		for j := range b {
			if a[i][j] != b[j] {
				t.Fatalf("%q: component %d differs between runs: %v vs %v", text, j, a[i][j], b[j])
			}
		}
	}
}

func TestHashDimAndModel(t *testing.T) {
	for _, tt := range []struct {
		dim, want int
		model     string
	}{
		{0, DefaultHashDim, "hash-v1-384"},
		{-5, DefaultHashDim, "hash-v1-384"},
		{64, 64, "hash-v1-64"},
		{1000, 1000, "hash-v1-1000"},
	} {
		h := NewHash(tt.dim)
		if h.Dim() != tt.want || h.Model() != tt.model {
			t.Errorf("NewHash(%d): Dim %d Model %q, want %d %q", tt.dim, h.Dim(), h.Model(), tt.want, tt.model)
		}
		if v := embedOne(t, h, "some words here"); len(v) != tt.want {
			t.Errorf("NewHash(%d) vector has %d entries, want %d", tt.dim, len(v), tt.want)
		}
	}
}

func TestHashNormalised(t *testing.T) {
	h := NewHash(0)
	for _, text := range []string{"a", "the user prefers dark mode", "Ünïcödé wörds and 123 numbers, repeated repeated repeated"} {
		if n := norm(embedOne(t, h, text)); math.Abs(n-1) > 1e-5 {
			t.Errorf("%q: norm %v, want 1", text, n)
		}
	}
}

func TestHashEmptyIsZero(t *testing.T) {
	h := NewHash(0)
	for _, text := range []string{"", "   ", "?!., --"} {
		v := embedOne(t, h, text)
		if len(v) != DefaultHashDim {
			t.Fatalf("%q: %d entries", text, len(v))
		}
		for i, x := range v {
			if x != 0 {
				t.Fatalf("%q: component %d is %v, want an all-zero vector", text, i, x)
			}
		}
	}
}

func TestHashCaseAndPunctuationInsensitive(t *testing.T) {
	h := NewHash(0)
	a := embedOne(t, h, "User prefers DARK mode!")
	b := embedOne(t, h, "user prefers dark mode")
	if c := Dot(a, b); math.Abs(c-1) > 1e-5 {
		t.Fatalf("cosine %v, want 1: case and punctuation should not matter", c)
	}
}

func TestHashWordOrderMatters(t *testing.T) {
	// Same words, different phrasing: close, but word bigrams keep them
	// from being identical.
	h := NewHash(0)
	c := Dot(embedOne(t, h, "alice pays bob"), embedOne(t, h, "bob pays alice"))
	if c > 0.95 || c < 0.5 {
		t.Fatalf("cosine of reordered sentence = %.3f, want high but clearly below 1", c)
	}
}

func TestHashSimilarity(t *testing.T) {
	h := NewHash(0)
	cases := []struct{ anchor, similar, unrelated string }{
		{"the user prefers dark mode", "user likes dark mode in the editor", "the invoice is due on friday"},
		{"deploys run on kubernetes in eu-west-1", "the kubernetes cluster for deploys is in eu-west-1", "alice is allergic to peanuts"},
		// Trigrams let inflected forms overlap.
		{"she preferred tea", "he prefers teas", "the server restarted twice"},
	}
	for _, c := range cases {
		a := embedOne(t, h, c.anchor)
		sim := Dot(a, embedOne(t, h, c.similar))
		unrel := Dot(a, embedOne(t, h, c.unrelated))
		if sim <= unrel+0.1 {
			t.Errorf("%q: cosine to %q = %.3f, to %q = %.3f; want the similar one clearly higher",
				c.anchor, c.similar, sim, c.unrelated, unrel)
		}
	}
}

func TestHashCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewHash(0).Embed(ctx, []string{"x"}); err == nil {
		t.Fatal("Embed on a cancelled context succeeded")
	}
}

func TestNormalizeAndDot(t *testing.T) {
	v := []float32{3, 4}
	Normalize(v)
	if math.Abs(float64(v[0])-0.6) > 1e-6 || math.Abs(float64(v[1])-0.8) > 1e-6 {
		t.Fatalf("Normalize([3 4]) = %v, want [0.6 0.8]", v)
	}
	z := []float32{0, 0, 0}
	Normalize(z)
	for _, x := range z {
		if x != 0 {
			t.Fatalf("Normalize(zero) = %v, want it untouched", z)
		}
	}
	if d := Dot([]float32{0.6, 0.8}, []float32{0.8, 0.6}); math.Abs(d-0.96) > 1e-6 {
		t.Fatalf("Dot = %v, want 0.96", d)
	}
	if d := Dot([]float32{1, 0}, []float32{1, 0, 0}); d != 0 {
		t.Fatalf("Dot of different lengths = %v, want 0", d)
	}
}

func TestNew(t *testing.T) {
	e, err := New(config.Embedder{})
	if err != nil || e.Model() != "hash-v1-384" {
		t.Fatalf("New(default) = %v, %v; want the hash embedder", e, err)
	}
	e, err = New(config.Embedder{Kind: "hash", Dim: 32})
	if err != nil || e.Dim() != 32 {
		t.Fatalf("New(hash, 32) = %v, %v", e, err)
	}
	e, err = New(config.Embedder{Kind: "openai", Dim: 8, OpenAI: config.OpenAI{BaseURL: "http://127.0.0.1:1", Model: "m"}})
	if err != nil || e.Model() != "m" || e.Dim() != 8 {
		t.Fatalf("New(openai) = %v, %v", e, err)
	}
	if _, err := New(config.Embedder{Kind: "openai"}); err == nil {
		t.Fatal("New(openai) without a model succeeded")
	}
	if _, err := New(config.Embedder{Kind: "word2vec"}); err == nil {
		t.Fatal("New(unknown kind) succeeded")
	}
}
