package query

import (
	"context"
	"hash/fnv"
	"math"
	"slices"
	"testing"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/internal/retrieval"
	"github.com/loomplane/loom/internal/text"
)

// semanticVector scripts an OpenAI-compatible embedder whose similarities spread as
// a semantic model's do: every text shares a common direction (unrelated texts sit
// at a cosine of about 0.2, not 0), and words of one concept share a direction, so
// "tipple" is near "whisky" though they share no letters.
func semanticVector(s string, dim int) []float64 {
	concepts := map[string]string{"tipple": "drink", "whisky": "drink", "malt": "drink", "drinks": "drink", "gin": "drink",
		"shipyard": "work", "works": "work", "welder": "work", "shoe": "size", "size": "size"}
	v := make([]float64, dim)
	v[0] = 0.8
	for _, w := range text.Words(s) {
		if text.Stopword(w) {
			continue
		}
		c, ok := concepts[w]
		if !ok {
			c = w
		}
		h := fnv.New32a()
		h.Write([]byte(c))
		v[1+int(h.Sum32()%uint32(dim-1))]++
	}
	var n float64
	for _, x := range v {
		n += x * x
	}
	for i := range v {
		v[i] /= math.Sqrt(n)
	}
	return v
}

// The attribute gate under a second score distribution: with a semantic embedder,
// the similarity reading decides what no word list knows, against a floor calibrated
// on the same embedder's background, and a missing attribute abstains.
func TestAttributeBySimilarityUnderASemanticEmbedder(t *testing.T) {
	srv := llmtest.New(t)
	srv.EmbedDim(256)
	srv.EmbedWith(semanticVector)
	e, err := embed.New(config.Embedder{Kind: "openai", Dim: 256, OpenAI: config.OpenAI{BaseURL: srv.URL, APIKey: "k", Model: "semantic-test"}})
	if err != nil {
		t.Fatal(err)
	}
	hits := []hitView{
		hitOf("fact-001", "Oskar drinks single malt whisky."),
		hitOf("fact-002", "Oskar works at a shipyard in Gdańsk."),
		hitOf("fact-003", "Mira keeps bees on her balcony."),
		hitOf("fact-004", "Jonas plays chess every Sunday."),
		hitOf("fact-005", "Ilse paints ceramic tiles."),
	}
	ctx := context.Background()
	for _, c := range []struct {
		query      string
		found      bool
		ungrounded bool
	}{
		{"What is Oskar's favourite tipple?", true, false},
		{"What is Oskar's shoe size?", false, true},
	} {
		plan := planQuery(c.query, planNow)
		// The threshold as the service calibrates it: a spread above the median
		// relevance of the namespace's rows to the query, under this embedder.
		in := []string{c.query}
		for i := range hits {
			in = append(in, memrowText(&hits[i]))
		}
		vecs, err := e.Embed(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		var sims []float64
		for _, v := range vecs[1:] {
			sims = append(sims, embed.Dot(vecs[0], v))
		}
		slices.Sort(sims)
		var mean, sd float64
		for _, x := range sims {
			mean += x / float64(len(sims))
		}
		for _, x := range sims {
			sd += (x - mean) * (x - mean) / float64(len(sims))
		}
		floor := sims[len(sims)/2] + math.Sqrt(sd)

		g := ground(retrieval.GroundingAbstain, plan, hits)
		if g.Attribute == nil || g.Attribute.Found {
			t.Fatalf("%q: the word readings should not find it: %+v", c.query, g.Attribute)
		}
		attributeBySimilarity(ctx, e, g.Attribute, c.query, plan, hits, floor)
		a := g.Attribute
		if a.Similarity == nil || a.Effect != effectAbstain {
			t.Fatalf("%q: the similarity reading did not run: %+v", c.query, a)
		}
		if a.Found != c.found || g.ungrounded() != c.ungrounded {
			t.Errorf("%q: found %v (similarity %.3f, floor %.3f), ungrounded %v; want %v, %v", c.query, a.Found, *a.Similarity, *a.Threshold,
				g.ungrounded(), c.found, c.ungrounded)
		}
		if c.found && a.Basis != basisSimilarity {
			t.Errorf("%q: basis %s", c.query, a.Basis)
		}
	}
	// The hash embedder's similarities are wording: the reading is not asked.
	plan := planQuery("What is Oskar's shoe size?", planNow)
	g := ground(retrieval.GroundingAbstain, plan, hits)
	attributeBySimilarity(ctx, embed.NewHash(0), g.Attribute, "What is Oskar's shoe size?", plan, hits, 0)
	if g.Attribute.Similarity != nil || g.Attribute.Effect != effectRisk || g.ungrounded() {
		t.Errorf("hash embedder: %+v", g.Attribute)
	}
}
