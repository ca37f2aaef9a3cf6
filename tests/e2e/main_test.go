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
	// The programs the tests run (testenv.Build) are built while the stores start.
	opts := testenv.Options{Prebuild: []string{"github.com/loomplane/loom/cmd/loomd",
		"github.com/loomplane/loom/examples/agent", "github.com/loomplane/loom/examples/consumer"}}
	testenv.MainWith(m, opts, &env, func(ctx context.Context, e *testenv.Env) error { return e.RunPipeline(ctx) })
}
