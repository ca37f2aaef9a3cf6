package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/loomplane/loom/client"
)

// A search hit's value is the canonical JSON the API documents (object keys in byte
// order, no insignificant whitespace), so a client hashing the bytes it was served gets
// the hit's content_sha256. Opened in Postgres, jsonb ordered the keys by length first
// ({"b":…,"aa":…}); the heads are opened in Go now, from the text the commit sealed.
func TestASearchHitServesItsValueAsCanonicalJSON(t *testing.T) {
	e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only"})
	typedSet(t, e.c, e.ns, "harbour.crane", client.SetRequest{Value: json.RawMessage(`{"b": "the harbour crane lifts cobalt containers", "aa": 12}`)})
	a := e.search(e.c, "harbour crane cobalt containers", client.SearchRequest{})
	if len(a.Hits) == 0 || a.Hits[0].MemoryKey != "harbour.crane" {
		t.Fatalf("hits %v", answerKeys(a))
	}
	h := a.Hits[0]
	if want := `{"aa":12,"b":"the harbour crane lifts cobalt containers"}`; string(h.Value) != want {
		t.Fatalf("value %s, want the canonical %s", h.Value, want)
	}
	if sum := sha256.Sum256(h.Value); hex.EncodeToString(sum[:]) != h.ContentSHA256 {
		t.Fatalf("the value served hashes to %x, its content_sha256 is %s", sum, h.ContentSHA256)
	}
}
