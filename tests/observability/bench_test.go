package observability

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// BenchmarkWrite is memory.set over HTTP against a process running the whole
// pipeline (api, relay, projector), with tracing off and on (every write sampled,
// exported to an in-process OTLP/HTTP receiver): what tracing costs a write.
func BenchmarkWrite(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run("tracing="+mode, func(b *testing.B) {
			var tr config.Tracing
			if mode == "on" {
				recv := startReceiver(b)
				c, err := config.Load(func(name string) string {
					return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": recv.url, "OTEL_BSP_SCHEDULE_DELAY": "200"}[name]
				})
				if err != nil {
					b.Fatal(err)
				}
				tr = c.Tracing
			}
			n, url, _ := env.Serve(b, []string{"api", "relay", "projector"}, func(c *config.Config) { c.Tracing = tr })
			tc := testenv.NewClient(url, env.Token(b, n, auth.NewToken{Org: "acme"}))
			ns := testenv.Unique(b, "bench-"+mode)
			tc.Configure(b, ns, map[string]any{"conflict_policy": "append_only"})
			headers := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
			i := 0
			for b.Loop() {
				i++
				body := fmt.Appendf(nil, `{"value":"benchmark fact number %d about tracing"}`, i)
				if r := tc.DoHeaders(b, http.MethodPut, fmt.Sprintf("/v1/namespaces/%s/memories/k%d", ns, i), body, headers); r.Status != http.StatusOK {
					b.Fatalf("write: %d %s", r.Status, r.Body)
				}
			}
		})
	}
}
