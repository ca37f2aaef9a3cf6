// Package workers drives the workers role (the conflict resolver and the entity
// extractor) against real stores and a scripted OpenAI-compatible model: each worker
// is a consumer group of the whole topic, so the suite has stores of its own, where
// every revision on the topic is one of its tests'.
package workers

import (
	"context"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env, func(ctx context.Context, e *testenv.Env) error { return e.RunPipeline(ctx) })
}
