// Package bench measures Loom against baselines measured in the same run on the same
// machine: `go test -run '^$' -bench . ./tests/bench/`. Nothing here runs in `make test`.
package bench

import (
	"context"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env, func(ctx context.Context, e *testenv.Env) error { return e.RunPipeline(ctx) })
}
