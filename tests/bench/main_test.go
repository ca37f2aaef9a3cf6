// Package bench_test keeps `loomd bench` from rotting: it runs the bench package's
// quick scenarios at a tiny size against the test stores. The measurements themselves
// are `loomd bench` and `make bench` (see README.md).
package bench_test

import (
	"context"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env, func(ctx context.Context, e *testenv.Env) error { return e.RunPipeline(ctx) })
}
