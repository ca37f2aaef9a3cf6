package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// A judged memory.set pays Postgres three round trips: the round's read (the key's
// heads, with the namespace's policy and calibration when the process has not read
// them yet), then the commit's two (the generation advance with the head locks and the
// gap, then the writes with the COMMIT). A namespace's first write pays the same three:
// what a namespace's first write reads more (its policy, its calibration) travels in
// the round's one read. Once the process holds the namespace's policy, a write of a
// key it knows no head of pays the commit's two alone: the commit's first batch checks
// that the key has no head (set_1_predict.go).
func TestAMemorySetTakesThreePostgresRoundTripsInANewNamespaceAndTwoAfter(t *testing.T) {
	trips := &roundTrips{}
	n, url := tracedAPI(t, trips)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: testenv.Unique(t, "org")}))
	set := func(ns, key, value string) []string {
		t.Helper()
		var id trace.TraceID
		_, _ = rand.Read(id[:])
		b, _ := json.Marshal(map[string]any{"value": value})
		r := c.DoHeaders(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/"+key, b,
			map[string]string{"traceparent": "00-" + hex.EncodeToString(id[:]) + "-00f067aa0ba902b7-01"})
		if r.Status != http.StatusOK {
			t.Fatalf("set %s/%s: %d %s", ns, key, r.Status, r.Body)
		}
		if a := r.JSON(t); a["written"] != true || a["verdict"] != "new" {
			t.Fatalf("set %s/%s answered %v, want a new memory written", ns, key, a)
		}
		var sent []string
		for _, s := range trips.of(id) {
			// The token's lookup is the edge's, read once and cached, not the write's.
			if !strings.Contains(s, "FROM loom.api_tokens") {
				sent = append(sent, s)
			}
		}
		return sent
	}
	// Words of no other value: every write is judged and finds no peer in reach.
	word := func() string {
		var b [6]byte
		_, _ = rand.Read(b[:])
		return "w" + hex.EncodeToString(b[:])
	}
	base := testenv.Unique(t, "trips")
	// The org's first write makes its user reference key, before its transaction.
	set(base+"-first", "k", "the org's first write makes its keys")
	for round := 0; round < 3; round++ {
		for i := 0; i < 3; i++ {
			ns := fmt.Sprintf("%s-%d", base, i)
			value := word() + " " + word() + " " + word()
			want := 2
			if round == 0 {
				want = 3
			}
			if sent := set(ns, fmt.Sprintf("k%d", round), value); len(sent) != want {
				t.Errorf("write %d into namespace %d (its first: %v) took %d round trips, want %d: %q", round, i, round == 0, len(sent), want, sent)
			}
		}
	}
}
