package command

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/loomplane/loom/internal/embed"
)

// countingEmbedder is the hash embedder, counting the calls made to it.
type countingEmbedder struct {
	*embed.Hash
	calls int
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.calls++
	return c.Hash.Embed(ctx, texts)
}

// Many documents embedded in one call: each chunk gets the vector of its own text, as
// if it had been embedded alone, and the embedder is called once for them all.
func TestEmbeddingManyDocumentsInOneCallKeepsEachChunksVector(t *testing.T) {
	ctx := context.Background()
	emb := &countingEmbedder{Hash: embed.NewHash(64)}
	s := New(Config{}, nil, emb, nil, nil, nil)
	var docs []*prepared
	for i, words := range []int{40, 700, 5} { // the second document is several chunks
		var b strings.Builder
		for w := 0; w < words; w++ {
			fmt.Fprintf(&b, "doc%d-word%d ", i, w%97)
			if w%60 == 59 {
				b.WriteString("\n\n")
			}
		}
		d, err := s.parseBody(ctx, "", &DocumentInput{SourceURI: fmt.Sprintf("d%d.txt", i)}, []byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	if len(docs[1].chunks) < 2 {
		t.Fatalf("the long document is %d chunk(s): the test needs several", len(docs[1].chunks))
	}
	if err := s.embed(ctx, docs...); err != nil {
		t.Fatal(err)
	}
	if emb.calls != 1 {
		t.Fatalf("%d calls to the embedder for %d documents, want 1", emb.calls, len(docs))
	}
	for _, d := range docs {
		if d.model != emb.Model() || d.dim != emb.Dim() {
			t.Errorf("%s: model %q dim %d", d.uri, d.model, d.dim)
		}
		for _, c := range d.chunks {
			alone, _ := emb.Hash.Embed(ctx, []string{c.Text})
			if !slices.Equal(c.Embedding, alone[0]) {
				t.Errorf("%s chunk %d: its vector is not its text's", d.uri, c.Ordinal)
			}
		}
	}
}
