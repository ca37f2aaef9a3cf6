package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// A process with LOOM_INDEX_CHECKPOINT_DIR warms from its checkpoint and the topic's
// tail: restarted, it answers read-your-writes and misses nothing written while it was
// down; an erasure and a redaction that landed meanwhile are not served, and the
// checkpoint it rewrites no longer holds their text. A damaged checkpoint is refused and
// the topic replayed.
func TestRestartFromTheIndexCheckpoint(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "index.checkpoint")
	withCheckpoint := func(c *config.Config) { c.SearchIndex.CheckpointDir = dir }
	n, url, stop := env.Serve(t, []string{"api"}, withCheckpoint)
	org := testenv.Unique(t, "org")
	token := env.Token(t, n, auth.NewToken{Org: org})
	c := testenv.NewClient(url, token)
	ns := testenv.Unique(t, "ckpt")
	c.AppendOnly(t, ns)
	put := func(c *testenv.Client, user, key, value string) map[string]any {
		r := c.Put(t, ns, key, map[string]any{"value": value, "user_id": user})
		if r.Status != http.StatusOK {
			t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
		}
		return r.JSON(t)
	}
	put(c, "alice", "alice-boat", "alice keeps a sailboat called tern in the marina")
	put(c, "alice", "alice-food", "alice is allergic to hazelnuts")
	put(c, "bob", "bob-boat", "bob rows a sailboat on sundays")
	secret := put(c, "bob", "bob-code", "bob's locker code is quokka seven")
	const probe = "sailboat marina tern hazelnuts quokka locker code alice bob sundays harbour"
	if got, _ := indexProbe(t, n, org, ns, probe); fmt.Sprint(got) != "[alice:alice-boat alice:alice-food bob:bob-boat bob:bob-code]" {
		t.Fatalf("before the stop the index holds %v", got)
	}
	stop() // a graceful stop writes the checkpoint
	held, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no checkpoint after a graceful stop: %v", err)
	}
	for _, word := range []string{"hazelnut", "quokka", "marina", "alice-boat"} {
		if !strings.Contains(string(held), word) {
			t.Fatalf("the checkpoint does not hold %q: the checks below prove nothing", word)
		}
	}

	// While it is down another process writes, erases alice, and replaces bob's code and
	// redacts the old one.
	other, otherURL := env.API(t, nil)
	o := testenv.NewClient(otherURL, token)
	for i := 0; i < 5; i++ {
		put(o, "bob", fmt.Sprintf("bob-harbour-%d", i), fmt.Sprintf("bob moored at harbour berth %d", i))
	}
	put(o, "bob", "bob-code", "bob's locker code was changed")
	o.Erase(t, map[string]any{"user_id": "alice", "namespace": ns})
	if _, err := o.Typed(t).Redact(context.Background(), ns, "bob-code",
		client.RedactRequest{Version: secret["version_text"].(string), Identity: client.Identity{UserID: "bob"}}); err != nil {
		t.Fatalf("redact: %v", err)
	}
	_ = other

	m, url2, stop2 := env.Serve(t, []string{"api"}, withCheckpoint)
	c2 := testenv.NewClient(url2, token)
	want := "[bob:bob-boat bob:bob-code bob:bob-harbour-0 bob:bob-harbour-1 bob:bob-harbour-2 bob:bob-harbour-3 bob:bob-harbour-4]"
	if got, _ := indexProbe(t, m, org, ns, probe); fmt.Sprint(got) != want {
		t.Fatalf("restarted from the checkpoint the index holds %v, want %s", got, want)
	}
	if _, lex := indexProbe(t, m, org, ns, "quokka hazelnuts tern marina"); len(lex) != 0 {
		t.Fatalf("restarted from the checkpoint the index finds erased or redacted words in %v", lex)
	}
	h, _ := m.IndexHealth()
	if h.Restored == 0 || h.Covered == 0 || h.RestoreRefused != "" {
		t.Fatalf("the restarted process did not warm from the checkpoint: %+v", h)
	}
	for _, q := range []string{"allergic to hazelnuts", "locker code quokka seven", "sailboat called tern in the marina"} {
		hits := c2.Search(t, ns, q, 10)
		if hits.Status != http.StatusOK {
			t.Fatalf("search %q: %d %s", q, hits.Status, hits.Body)
		}
		if body := fmt.Sprint(hits.JSON(t)["hits"]); strings.Contains(body, "alice") || strings.Contains(body, "quokka") || strings.Contains(body, "hazelnut") {
			t.Fatalf("restarted from the checkpoint, search %q serves erased or redacted content: %s", q, body)
		}
	}
	// Read-your-writes on the restarted process.
	w := put(c2, "bob", "bob-new", "bob bought a kayak named puffin")
	found, err := c2.Typed(t).Search(context.Background(), ns, client.SearchRequest{Query: "kayak named puffin", TopK: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(found.Hits, func(h client.Hit) bool { return h.MemoryKey == "bob-new" && h.MemoryID == w["memory_id"] }) {
		t.Fatalf("a write on the restarted process was not found by the next search: %+v", found.Hits)
	}
	// The erasure in the tail made it rewrite the checkpoint without the erased text.
	testenv.Eventually(t, 30*time.Second, "the checkpoint rewritten without the erased and redacted text", func() bool {
		b, err := os.ReadFile(file)
		return err == nil && !strings.Contains(string(b), "hazelnut") && !strings.Contains(string(b), "quokka") &&
			!strings.Contains(string(b), "marina") && !strings.Contains(string(b), "alice-boat") && strings.Contains(string(b), "harbour")
	})
	stop2()

	// A damaged checkpoint is refused, deleted, and the topic replayed.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r, _, _ := env.Serve(t, []string{"api"}, withCheckpoint)
	if got, _ := indexProbe(t, r, org, ns, probe+" kayak puffin"); !slices.Contains(got, "bob:bob-new") || slices.Contains(got, "alice:alice-boat") {
		t.Fatalf("after a damaged checkpoint the replayed index holds %v", got)
	}
	if h, _ := r.IndexHealth(); h.Restored != 0 || !strings.Contains(h.RestoreRefused, "checksum") {
		t.Fatalf("a damaged checkpoint was not refused: %+v", h)
	}
}
