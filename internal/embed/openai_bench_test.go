package embed

import (
	"context"
	"testing"

	"github.com/loomplane/loom/internal/llm/llmtest"
)

// BenchmarkOpenAIEmbedScripted is one memory.set's embedding call (its value and its
// key's words, 256 dimensions) against the scripted server over loopback HTTP: the
// embedder's share of a write in the peers scenario.
func BenchmarkOpenAIEmbedScripted(b *testing.B) {
	srv := llmtest.New(b)
	srv.EmbedDim(256)
	e, err := NewOpenAI(OpenAIConfig{BaseURL: srv.URL, APIKey: "bench", Model: "bench", Dim: 256})
	if err != nil {
		b.Fatal(err)
	}
	texts := []string{"alder brook lives in the harbour town of quill", "fact 123"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
}
