package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// BenchmarkBulkVsSet writes 1,000 memories per op into a fresh namespace, once as one
// memory.bulk_set and once as 1,000 sequential memory.set calls, in the same run.
func BenchmarkBulkVsSet(b *testing.B) {
	n, url := env.API(b, nil)
	c := testenv.NewClient(url, env.Token(b, n, auth.NewToken{Org: "bench"}))
	rng := rand.New(rand.NewPCG(7, 7))
	values := func() []string {
		v := make([]string, 1000)
		for i := range v {
			v[i] = sentence(rng)
		}
		return v
	}
	b.Run("bulk_set=1000", func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			vs := values()
			entries := make([]map[string]any, len(vs))
			for j, v := range vs {
				entries[j] = map[string]any{"key": fmt.Sprintf("k%04d", j), "value": v}
			}
			body, _ := json.Marshal(map[string]any{"entries": entries})
			ns := testenv.Unique(b, fmt.Sprintf("bulk%d", i))
			start := time.Now()
			r := c.Do(b, http.MethodPost, "/v1/namespaces/"+ns+"/memories:bulkSet", body)
			total += time.Since(start)
			if r.Status != http.StatusOK {
				b.Fatalf("bulk: %d %s", r.Status, r.Body)
			}
		}
		b.ReportMetric(float64(b.N*1000)/total.Seconds(), "rows/s")
		b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/batch")
	})
	b.Run("set=1000x1", func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			vs := values()
			ns := testenv.Unique(b, fmt.Sprintf("seq%d", i))
			start := time.Now()
			for j, v := range vs {
				body, _ := json.Marshal(map[string]any{"value": v})
				if r := c.Do(b, http.MethodPut, fmt.Sprintf("/v1/namespaces/%s/memories/k%04d", ns, j), body); r.Status != http.StatusOK {
					b.Fatalf("set: %d %s", r.Status, r.Body)
				}
			}
			total += time.Since(start)
		}
		b.ReportMetric(float64(b.N*1000)/total.Seconds(), "rows/s")
		b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/batch")
	})
}
