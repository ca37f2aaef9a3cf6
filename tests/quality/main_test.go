// Package quality measures retrieval quality: it writes a hand-written corpus about a
// fictional company (corpus.json) into one namespace, runs 100 labelled queries through
// memory.search and reports recall@5 and MRR per search leg and for the fused search,
// and how well the search abstains on questions the corpus cannot answer.
package quality

//go:generate go run ./gen -out corpus.json

import (
	"context"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env, func(ctx context.Context, e *testenv.Env) error { return e.RunPipeline(ctx) })
}
