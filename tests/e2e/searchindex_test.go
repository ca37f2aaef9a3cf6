package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/indexfeed"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/internal/text"
	"github.com/loomplane/loom/tests/testenv"
)

// follower runs an index and its follower over the test topic until stop.
type follower struct {
	index *searchindex.Index
	feed  *indexfeed.Follower
	stop  func()
}

func startFollower(t *testing.T) *follower {
	t.Helper()
	cfg := env.Config(nil)
	idx := searchindex.New(searchindex.Config{})
	feed := indexfeed.New(indexfeed.Config{Brokers: env.Stack.Kafka.Brokers(), Topic: cfg.Pipeline.Topic}, env.PG(t), idx,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- feed.Run(ctx) }()
	f := &follower{index: idx, feed: feed}
	f.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("follower: %v", err)
		}
		idx.Close()
	}
	t.Cleanup(func() {
		select {
		case <-ctx.Done():
		default:
			f.stop()
		}
	})
	select {
	case <-feed.Warmed():
	case <-time.After(60 * time.Second):
		t.Fatalf("the follower did not warm: %+v", feed.Progress())
	}
	return f
}

// caughtUp waits until the index applied the namespace's generation, as the barrier will.
func (f *follower) caughtUp(t *testing.T, org, ns string) {
	t.Helper()
	gen := testenv.Generation(t, env.PG(t), org, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.index.WaitFor(ctx, searchindex.Space{Org: org, Namespace: ns}, gen); err != nil {
		t.Fatalf("the index did not reach generation %d of %s: %v (at %d)", gen, ns, err,
			f.index.Position(searchindex.Space{Org: org, Namespace: ns}))
	}
}

func (f *follower) search(t *testing.T, org, ns, q string, user string) searchindex.Legs {
	t.Helper()
	vec, _ := embed.NewHash(384).Embed(context.Background(), []string{q})
	var terms []string
	for _, w := range text.Terms(q) {
		if !slices.Contains(terms, w) {
			terms = append(terms, w)
		}
	}
	legs, _, err := f.index.Search(searchindex.Space{Org: org, Namespace: ns}, searchindex.Query{
		Filter: searchindex.Filter{UserID: user, Statuses: []string{"active", "conflicted"}, Now: time.Now()},
		Vector: vec[0], Text: q, Terms: terms, Limit: 50, K1: 1.2, B: 0.75})
	if err != nil {
		t.Fatal(err)
	}
	return legs
}

func legKeys(hits []searchindex.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.UserID+":"+h.MemoryKey)
	}
	slices.Sort(out)
	return out
}

// Revisions written through Loom reach a follower's index with their content; a
// restarted follower rebuilds the same index from the topic; an erased user's content is
// gone from the index and does not come back on a restart.
func TestIndexFollowerServesWritesAndForgetsErasures(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "idx")
	c.AppendOnly(t, ns)
	put := func(user, key, value string) map[string]any {
		r := c.Put(t, ns, key, map[string]any{"value": value, "user_id": user, "tags": []string{"t-" + user}})
		if r.Status != http.StatusOK {
			t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
		}
		return r.JSON(t)
	}
	ann := put("ann", "ann-seat", "ann prefers a window seat on long flights")
	put("ben", "ben-seat", "ben prefers an aisle seat on long flights")
	put("ann", "ann-tea", "ann drinks green tea every morning")

	f := startFollower(t)
	f.caughtUp(t, org, ns)
	legs := f.search(t, org, ns, "window seat on flights", "")
	if len(legs.Vector) == 0 || legs.Vector[0].MemoryKey != "ann-seat" || legs.Vector[0].ContentSHA256 != ann["content_sha256"] {
		t.Fatalf("vector leg %+v, want ann-seat with the written content first", legs.Vector)
	}
	if got := legKeys(legs.Lexical); fmt.Sprint(got) != "[ann:ann-seat ben:ben-seat]" {
		t.Fatalf("lexical leg %v", got)
	}
	if key := f.search(t, org, ns, "ann-tea", "").Key; len(key) != 2 || key[0].MemoryKey != "ann-tea" || key[0].Score != 1 || key[1].Score != 0.5 {
		t.Fatalf("key leg %+v, want ann-tea verbatim, then ann-seat by one word of two", key)
	}

	// Following: a write after the warm-up, a revision, a delete.
	put("ben", "ben-city", "ben moved to lisbon last spring")
	put("ann", "ann-tea", "ann switched to black coffee")
	if r := c.Do(t, http.MethodDelete, "/v1/namespaces/"+ns+"/memories/ben-seat?user_id=ben", nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	f.caughtUp(t, org, ns)
	if got := legKeys(f.search(t, org, ns, "lisbon coffee tea seat", "").Lexical); fmt.Sprint(got) != "[ann:ann-seat ann:ann-tea ben:ben-city]" {
		t.Fatalf("after following: lexical %v", got)
	}
	if got := f.search(t, org, ns, "green tea every morning", "").Lexical; len(got) != 0 {
		t.Fatalf("the revised value's old text is served: %+v", got)
	}
	vec, _ := embed.NewHash(384).Embed(context.Background(), []string{"ann prefers a window seat on long flights"})
	peers, pos, err := f.index.Peers(searchindex.Space{Org: org, Namespace: ns}, searchindex.PeerQuery{MemoryType: "fact",
		MemoryKey: "another-key", ReadUserID: "ann", Vector: vec[0], Limit: 16, Now: time.Now()})
	if err != nil || len(peers) != 2 || peers[0].MemoryKey != "ann-seat" || peers[0].Cosine < 0.99 || peers[1].UserID != "ann" {
		t.Fatalf("peers of ann's write: %+v, %v", peers, err)
	}
	if gen := testenv.Generation(t, env.PG(t), org, ns); pos != gen {
		t.Fatalf("the peer read's position %d, generation %d", pos, gen)
	}

	before := f.index.Stats()
	f.stop()
	g := startFollower(t)
	g.caughtUp(t, org, ns)
	after := g.index.Stats()
	sp := searchindex.Space{Org: org, Namespace: ns}
	if spaceStats(before, sp) != spaceStats(after, sp) {
		t.Fatalf("a restarted follower built another index:\n before %+v\n after  %+v", spaceStats(before, sp), spaceStats(after, sp))
	}

	c.Erase(t, map[string]any{"user_id": "ann", "namespace": ns})
	g.caughtUp(t, org, ns)
	for _, idx := range []*follower{g} {
		legs := idx.search(t, org, ns, "ann window seat black coffee lisbon", "")
		if got := legKeys(append(append(legs.Lexical, legs.Vector...), legs.Key...)); slices.ContainsFunc(got, func(k string) bool { return k[:4] == "ann:" }) {
			t.Fatalf("the erased user's content is served: %v", got)
		}
	}
	g.stop()
	h := startFollower(t)
	h.caughtUp(t, org, ns)
	legs = h.search(t, org, ns, "ann window seat black coffee lisbon", "")
	got := legKeys(append(append(legs.Lexical, legs.Vector...), legs.Key...))
	if slices.ContainsFunc(got, func(k string) bool { return k[:4] == "ann:" }) || !slices.Contains(got, "ben:ben-city") {
		t.Fatalf("after a restart: %v, want ben's rows and none of ann's", got)
	}
	if p := h.feed.Progress(); p.Keyless == 0 {
		t.Fatalf("the replay met no revision whose key the erasure destroyed: %+v", p)
	}
}

func spaceStats(st searchindex.Stats, sp searchindex.Space) string {
	for _, s := range st.Spaces {
		if s.Space == sp {
			return fmt.Sprintf("entries %d vectors %d position %d", s.Entries, s.Vectors, s.Position)
		}
	}
	return "absent"
}
