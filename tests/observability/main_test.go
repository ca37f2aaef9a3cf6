// Package observability checks what an operator watches a running Loom through, over
// real servers: /metrics as Prometheus parses it, and a write's trace from the request
// through the commit, the relay and the topic to the projector and the index.
package observability

import (
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

var env *testenv.Env

// No background pipeline: each test runs the relay and the projector it observes.
func TestMain(m *testing.M) { testenv.Main(m, &env, nil) }
