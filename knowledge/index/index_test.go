package index

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/knowledge/store"
)

func written(seq, version int64, uri, format string, tags []string, texts ...string) op {
	c := &events.DocumentContent{SourceURI: uri, Title: uri, Tags: tags}
	for i, t := range texts {
		c.Chunks = append(c.Chunks, events.DocumentChunk{Ordinal: i, Kind: "paragraph", Text: t})
	}
	env := &events.Envelope{Type: events.TypeDocumentWritten, Seq: seq,
		Document: &events.Document{DocID: uri, Version: version, Format: format}}
	return op{org: "o", ns: "n", seq: seq, env: env, content: c}
}

func flip(seq int64, uri string, typ events.Type) op {
	return op{org: "o", ns: "n", seq: seq, env: &events.Envelope{Type: typ, Seq: seq, Document: &events.Document{}},
		content: &events.DocumentContent{SourceURI: uri}}
}

func uris(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.SourceURI)
	}
	return out
}

func TestSearchRanksLexicallyAndFilters(t *testing.T) {
	x := New(Config{})
	x.apply([]op{
		written(1, 10, "handbook/travel.txt", "text", []string{"policy"}, "Book travel through the portal.", "Receipts within thirty days."),
		written(2, 20, "tickets/1.txt", "text", nil, "The printer jams on duplex jobs."),
		written(3, 30, "handbook/printer.md", "markdown", []string{"policy"}, "Printer paper is in the cupboard."),
	})
	if got := uris(x.Search("o", "n", "printer jams", nil, Filter{}, 10)); len(got) != 2 || got[0] != "tickets/1.txt" {
		t.Fatalf("printer jams: %v", got)
	}
	if got := uris(x.Search("o", "n", "printer", nil, Filter{SourcePrefix: "handbook/"}, 10)); len(got) != 1 || got[0] != "handbook/printer.md" {
		t.Fatalf("by prefix: %v", got)
	}
	if got := uris(x.Search("o", "n", "printer", nil, Filter{Formats: []string{"text"}}, 10)); len(got) != 1 || got[0] != "tickets/1.txt" {
		t.Fatalf("by format: %v", got)
	}
	if got := uris(x.Search("o", "n", "printer receipts", nil, Filter{Tags: []string{"policy"}}, 10)); len(got) != 2 {
		t.Fatalf("by tag: %v", got)
	}
	if got := x.Search("o", "other", "printer", nil, Filter{}, 10); len(got) != 0 {
		t.Fatalf("another namespace: %v", got)
	}
}

func TestANewVersionReplacesItsChunksAndAnOlderOneIsIgnored(t *testing.T) {
	x := New(Config{})
	x.apply([]op{written(1, 10, "a.txt", "text", nil, "alpha wombat"), written(2, 20, "a.txt", "text", nil, "beta")})
	if got := x.Search("o", "n", "wombat", nil, Filter{}, 10); len(got) != 0 {
		t.Fatalf("the old version's chunk is still served: %v", got)
	}
	x.apply([]op{written(3, 15, "a.txt", "text", nil, "gamma")}) // a replay of an older version
	if got := x.Search("o", "n", "beta", nil, Filter{}, 10); len(got) != 1 || got[0].Seq != 2 {
		t.Fatalf("after an older version: %+v", got)
	}
}

func TestDeleteRestoreAndAnErasureFence(t *testing.T) {
	x := New(Config{})
	x.apply([]op{written(1, 10, "a.txt", "text", nil, "okapi"), written(2, 20, "b.txt", "text", nil, "okapi too")})
	x.apply([]op{flip(3, "a.txt", events.TypeDocumentDeleted)})
	if got := uris(x.Search("o", "n", "okapi", nil, Filter{}, 10)); len(got) != 1 || got[0] != "b.txt" {
		t.Fatalf("after a delete: %v", got)
	}
	x.apply([]op{flip(4, "a.txt", events.TypeDocumentRestored)})
	if got := x.Search("o", "n", "okapi", nil, Filter{}, 10); len(got) != 2 {
		t.Fatalf("after a restore: %v", uris(got))
	}
	x.apply([]op{{org: "o", ns: "n", seq: 5, fence: true}, written(6, 30, "c.txt", "text", nil, "okapi after")})
	if got := uris(x.Search("o", "n", "okapi", nil, Filter{}, 10)); len(got) != 1 || got[0] != "c.txt" {
		t.Fatalf("after an erasure: %v", got)
	}
	if x.Position("o", "n") != 6 {
		t.Fatalf("position %d", x.Position("o", "n"))
	}
}

func TestWaitForReturnsOnceThePositionArrives(t *testing.T) {
	x := New(Config{})
	done := make(chan error, 1)
	go func() { done <- x.WaitFor(context.Background(), "o", "n", 2) }()
	x.apply([]op{{org: "o", ns: "n", seq: 1}})
	x.apply([]op{{org: "o", ns: "n", seq: 2}})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := x.WaitFor(ctx, "o", "n", 3); err == nil {
		t.Fatal("WaitFor returned before the position arrived")
	}
}

// forUser is written for a document of user (its reference, on the record, is ref).
func forUser(o op, user, ref string) op {
	o.content.UserID, o.env.Document.UserRef = user, ref
	return o
}

// A user's reads see the namespace's documents and the user's own; a user's erasure
// fence drops the sources whose records named the user's reference below it, and
// leaves the namespace's, another user's, and the user's written after it.
func TestAUsersScopeAndErasureFence(t *testing.T) {
	x := New(Config{})
	x.apply([]op{written(1, 10, "shared.txt", "text", nil, "okapi handbook"),
		forUser(written(2, 20, "bob.txt", "text", nil, "okapi plan"), "bob", "ref-bob"),
		forUser(written(3, 30, "alice.txt", "text", nil, "okapi notes"), "alice", "ref-alice")})
	for _, c := range []struct {
		users store.Users
		want  int
	}{{store.Users{}, 3}, {store.Users{Scoped: true, User: "bob"}, 2}, {store.Users{Scoped: true}, 1}} {
		if got := x.Search("o", "n", "okapi", nil, Filter{Users: c.users}, 10); len(got) != c.want {
			t.Errorf("users %+v: %v, want %d", c.users, uris(got), c.want)
		}
	}
	x.apply([]op{{org: "o", ns: "n", seq: 4, fence: true, userRef: "ref-bob"},
		forUser(written(5, 50, "bob-later.txt", "text", nil, "okapi later"), "bob", "ref-bob")})
	got := uris(x.Search("o", "n", "okapi", nil, Filter{}, 10))
	slices.Sort(got)
	if !slices.Equal(got, []string{"alice.txt", "bob-later.txt", "shared.txt"}) {
		t.Fatalf("after bob's erasure: %v", got)
	}
}

// A user's erasure recorded after a rotation of the org's user reference key names the
// user under the new generation, which the sources written before it cannot be
// compared with: of those, it takes the ones the erasure left no head, and leaves the
// namespace's, another user's (their heads are left) and those of its own generation
// that name another user.
func TestAUsersErasureAfterARotationTakesTheSourcesItLeftNoHead(t *testing.T) {
	x := New(Config{})
	gen := func(o op, g int) op { o.refGen = g; return o }
	x.apply([]op{gen(written(1, 10, "shared.txt", "text", nil, "okapi handbook"), 1),
		gen(forUser(written(2, 20, "bob.txt", "text", nil, "okapi plan"), "bob", "ref1-bob"), 1),
		gen(forUser(written(3, 30, "alice.txt", "text", nil, "okapi notes"), "alice", "ref1-alice"), 1),
		gen(forUser(written(4, 40, "carol.txt", "text", nil, "okapi diary"), "carol", "ref2-carol"), 2)})
	x.apply([]op{{org: "o", ns: "n", seq: 5, fence: true, userRef: "ref2-bob", refGen: 2,
		live: map[string]bool{"shared.txt": true, "alice.txt": true, "carol.txt": true}}})
	got := uris(x.Search("o", "n", "okapi", nil, Filter{}, 10))
	slices.Sort(got)
	if !slices.Equal(got, []string{"alice.txt", "carol.txt", "shared.txt"}) {
		t.Fatalf("after bob's erasure under the next generation: %v, want bob.txt gone and the rest kept", got)
	}
}
