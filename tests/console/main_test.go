// Package console drives the web console (/console) in headless Chromium against
// loomd on real stores: the pages call the REST API as the signed-in token, so what the
// browser shows is what the API answered that token.
package console

import (
	"context"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env, func(ctx context.Context, e *testenv.Env) error { return e.RunPipeline(ctx) })
}
