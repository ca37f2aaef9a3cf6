// Package faults breaks Loom's pipeline on purpose, against real servers: a relay that
// dies between produce and delete, a projector stopped mid-stream, Postgres going away.
// Each test runs the relay and its own projection itself, so tests run one at a time.
// Its processes search ClickHouse (LOOM_SEARCH_INDEX=clickhouse), since the searches
// here test the projection behind them; the tests of the in-process index's barrier
// opt back in (index_test.go).
package faults

import (
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// loomd (the rebuild and relay takeover tests run it) is built while the first tests run.
	testenv.MainWith(m, testenv.Options{ClickHouseSearch: true, Prebuild: []string{"github.com/loomplane/loom/cmd/loomd"}}, &env, nil)
}
