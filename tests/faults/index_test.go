package faults

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	typed "github.com/loomplane/loom/client"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// On the index path a search waits for the process's own index, in process: with the
// relay stopped no record reaches it, and a search of the last write answers a
// retryable 503 PROJECTION_BEHIND naming the index's position once the wait is spent.
// Once the relay runs, the write is found, though no projector of the process's
// projection runs at all: the index needs none, and history, which reads the
// journal, none either.
func TestIndexSearchWithTheRelayStoppedIsProjectionBehind(t *testing.T) {
	p := projection(t)
	const wait = 700 * time.Millisecond
	c := client(t, func(cfg *config.Config) {
		cfg.SearchIndex.Mode = config.SearchIndexMemory
		cfg.Pipeline.Projection = p
		cfg.Query.ProjectionWait = wait
	})
	ns := testenv.Unique(t, "idxbehind")
	c.Set(t, ns, "k", "a fact the relay has not published")
	ctx, tc := context.Background(), c.Typed(t)
	search := typed.SearchRequest{Query: "a fact the relay has not published", TopK: 3}
	start := time.Now()
	_, err := tc.Search(ctx, ns, search)
	waited := time.Since(start)
	e, _ := typed.AsError(err)
	if e == nil || e.Status != http.StatusServiceUnavailable || e.Code != typed.CodeProjectionBehind || !e.Retryable {
		t.Fatalf("search with the relay stopped: %v", err)
	}
	if e.Namespace != ns || e.Generation != 1 || !strings.Contains(e.Message, "search index") {
		t.Fatalf("PROJECTION_BEHIND envelope: %+v", e)
	}
	if waited < wait {
		t.Fatalf("answered after %s, before the configured wait of %s", waited, wait)
	}

	env.Relay(t, relay.Faults{})
	var found *typed.SearchAnswer
	testenv.Eventually(t, 30*time.Second, "the index to apply the write", func() bool {
		found, err = tc.Search(ctx, ns, search)
		return !typed.IsCode(err, typed.CodeProjectionBehind)
	})
	if err != nil || len(found.Hits) != 1 || found.Hits[0].MemoryKey != "k" {
		t.Fatalf("search once the relay runs: %v %+v", err, found)
	}
	// The same fact under another key is judged against it (peers from the index).
	again, err := tc.Set(ctx, ns, "k2", typed.SetRequest{Value: "a fact the relay has not published"})
	if err != nil || (again.Written && again.Verdict == "new") {
		t.Fatalf("the same fact under another key: %+v %v", again, err)
	}
	if h, err := tc.History(ctx, ns, "k", typed.Identity{}); err != nil || len(h.Versions) != 1 {
		t.Fatalf("history without a projector of %s: %v %+v", p, err, h)
	}
}

// keyReads counts the index follower's reads of revision keys (revisions.FetchKeys)
// that name a namespace.
type keyReads struct {
	ns string
	n  atomic.Int64
}

func (k *keyReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "FROM loom.revision_keys k") && len(d.Args) > 1 {
		if nss, ok := d.Args[1].([]string); ok && slices.Contains(nss, k.ns) {
			k.n.Add(1)
		}
	}
	return ctx
}

func (k *keyReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A process that runs the relay beside its index hands the data key it seals each
// revision with to its index follower: the write is searchable, its content opened,
// without the follower reading the key back from Postgres (a round trip on every
// write's way to searchable, issue 35).
func TestAProcessThatPublishesIndexesItsWritesWithoutReadingTheirKeysBack(t *testing.T) {
	ns := testenv.Unique(t, "handoff")
	reads := &keyReads{ns: ns}
	n, url, _ := env.Serve(t, []string{"api", "relay"}, func(cfg *config.Config) {
		cfg.SearchIndex.Mode = config.SearchIndexMemory
		cfg.Pipeline.Projection = projection(t)
	}, app.WithPGTracer(reads))
	tc := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org})).Typed(t)
	ctx := context.Background()
	for i, fact := range []string{"the handoff fact about tea", "the handoff fact about trains"} {
		if _, err := tc.Set(ctx, ns, fmt.Sprintf("k%d", i), typed.SetRequest{Value: fact}); err != nil {
			t.Fatal(err)
		}
	}
	found, err := tc.Search(ctx, ns, typed.SearchRequest{Query: "the handoff fact about trains", TopK: 1})
	if err != nil || len(found.Hits) != 1 || found.Hits[0].MemoryKey != "k1" {
		t.Fatalf("search of a write this process published: %v %+v", err, found)
	}
	if got := reads.n.Load(); got != 0 {
		t.Errorf("the index follower read the keys of the writes its relay sealed %d times", got)
	}
}
