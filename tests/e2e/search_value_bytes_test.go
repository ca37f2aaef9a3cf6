package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

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

// Every read that serves a value serves its canonical JSON, as search does: get, get by
// id, bulk get, list and history, so the bytes a client is served hash to the
// content_sha256 beside them whichever read it used. Opened in Postgres, jsonb ordered
// the keys by length first ({"b":…,"aa":…}).
func TestEveryReadServesTheValueAsCanonicalJSON(t *testing.T) {
	e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only"})
	ctx := context.Background()
	typedSet(t, e.c, e.ns, "harbour.ledger", client.SetRequest{Value: json.RawMessage(`{"b": "ledger", "aa": 12, "n": {"zz": [1, {"yy": 2, "x": 3}], "a": null}}`)})
	const want = `{"aa":12,"b":"ledger","n":{"a":null,"zz":[1,{"x":3,"yy":2}]}}`
	check := func(read string, value json.RawMessage, sha string) {
		t.Helper()
		if string(value) != want {
			t.Errorf("%s served %s, want the canonical %s", read, value, want)
		}
		if sum := sha256.Sum256(value); hex.EncodeToString(sum[:]) != sha {
			t.Errorf("%s: the value served hashes to %x, its content_sha256 is %s", read, sum, sha)
		}
	}
	tc := e.c.Typed(t)
	m, err := tc.Get(ctx, e.ns, "harbour.ledger", client.Identity{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	check("get", m.Value, m.ContentSHA256)
	byID, err := tc.GetByID(ctx, m.MemoryID)
	if err != nil {
		t.Fatal(err)
	}
	check("get by id", byID.Value, byID.ContentSHA256)
	bulk, err := tc.BulkGet(ctx, e.ns, client.BulkGetRequest{IDs: []string{m.MemoryID}})
	if err != nil || len(bulk.Memories) != 1 {
		t.Fatalf("bulk get: %v %v", bulk, err)
	}
	check("bulk get", bulk.Memories[0].Value, bulk.Memories[0].ContentSHA256)
	list, err := tc.List(ctx, e.ns, client.ListOptions{})
	if err != nil || len(list.Memories) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	check("list", list.Memories[0].Value, list.Memories[0].ContentSHA256)
	h, err := tc.History(ctx, e.ns, "harbour.ledger", client.Identity{})
	if err != nil || len(h.Versions) != 1 {
		t.Fatalf("history: %v %v", h, err)
	}
	check("history", h.Versions[0].Value, h.Versions[0].ContentSHA256)
}
