package quality

import (
	"testing"
	"time"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/query"
)

// apiOptions builds the suite's API node with the planner's clock at the corpus's
// clock, so the temporal queries' relative times ("next month") mean what their
// labels say.
func apiOptions(t *testing.T, clock string) []app.Option {
	at, err := time.Parse(time.RFC3339, clock)
	if err != nil {
		t.Fatalf("corpus.json: clock %q: %v", clock, err)
	}
	return []app.Option{app.WithQueryOptions(query.WithPlannerClock(func() time.Time { return at }))}
}
