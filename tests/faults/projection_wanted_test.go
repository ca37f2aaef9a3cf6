package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	loom "github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// A projector that stretched its pace under steady writes (LOOM_PROJECTOR_BUSY_INTERVAL_MS)
// still answers a read that waits for it within the read's budget: the barrier calls
// the projector (watermarks.WantedChannel), which goes back to its interval's pace. The
// busy interval here is longer than the budget, so a read the projector did not hear
// would be a 503 PROJECTION_BEHIND.
func TestAReadWaitingForAStretchedProjectionIsAnsweredInItsBudget(t *testing.T) {
	n, url, _ := env.Serve(t, []string{"api", "relay", "projector"}, func(c *config.Config) {
		c.Projector.Interval = 250 * time.Millisecond
		c.Projector.BusyInterval = time.Minute
		c.Query.ProjectionWait = 4 * time.Second
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := loom.New(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Unique(t, "stretched")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the steady writes that stretch the pace
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = c.Set(ctx, ns, fmt.Sprintf("steady-%d", i), loom.SetRequest{Value: fmt.Sprintf("steady fact number %d", i)})
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer wg.Wait()
	defer cancel()
	time.Sleep(2 * time.Second)
	for i := 0; i < 3; i++ {
		key := fmt.Sprintf("probe-%d", i)
		if _, err := c.Set(ctx, ns, key, loom.SetRequest{Value: "a fact a reader lists right away " + key}); err != nil {
			t.Fatalf("write %s: %v", key, err)
		}
		list, err := c.List(ctx, ns, loom.ListOptions{Order: "key", Limit: 500})
		if err != nil {
			t.Fatalf("list after writing %s under steady writes: %v", key, err)
		}
		found := false
		for _, m := range list.Memories {
			found = found || m.MemoryKey == key
		}
		if !found {
			t.Fatalf("list after writing %s: %d memories without it", key, len(list.Memories))
		}
	}
}
