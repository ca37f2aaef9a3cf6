// Package e2e drives Loom over REST against real servers: a write goes through
// Postgres, the outbox, Kafka and the projector, and comes back from search.
package e2e

import (
	"context"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env, func(ctx context.Context, e *testenv.Env) error { return e.RunPipeline(ctx) })
}
