package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// headsReadHold holds the answer of one round's read of a key's heads (heads.WithKeysSQL,
// in the round's batch) until the embedder has been asked for a text, or for at most
// patience: a write whose embedding call waits for that read is held the whole time.
type headsReadHold struct {
	ns, key   string
	patience  time.Duration
	mu        sync.Mutex
	armed     bool
	asked     chan struct{}
	heldFor   time.Duration
	askedOnce sync.Once
}

func (h *headsReadHold) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (h *headsReadHold) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (h *headsReadHold) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (h *headsReadHold) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (h *headsReadHold) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if d.SQL != heads.WithKeysSQL || len(d.Args) < 3 || d.Args[1] != h.ns {
		return
	}
	if keys, ok := d.Args[2].([]string); !ok || !slices.Contains(keys, h.key) {
		return
	}
	h.mu.Lock()
	armed := h.armed
	h.armed = false
	h.mu.Unlock()
	if !armed {
		return
	}
	start := time.Now()
	select {
	case <-h.asked:
	case <-time.After(h.patience):
	}
	h.heldFor = time.Since(start)
}

// A memory.set on a network embedder asks for its vectors while its round reads the key's
// heads, not after: the write waits for the longer of the two round trips instead of
// both (issue 35's sequential add). The second write's read is held until the embedder
// is asked for its value: a write that embeds only after the read would hold it for the
// whole patience.
func TestAWriteAsksTheEmbedderWhileItReadsItsHeads(t *testing.T) {
	srv := llmtest.New(t)
	srv.EmbedDim(64)
	ns := testenv.Unique(t, "ahead")
	const value = "the ahead fact about the lighthouse keeper"
	hold := &headsReadHold{ns: ns, key: "keeper", patience: 3 * time.Second, asked: make(chan struct{})}
	srv.EmbedWith(func(text string, dim int) []float64 {
		if text == value {
			hold.askedOnce.Do(func() { close(hold.asked) })
		}
		return llmtest.Vector(text, dim)
	})
	n, url := env.API(t, func(c *config.Config) {
		c.Embedder = config.Embedder{Kind: "openai", Dim: 64, OpenAI: config.OpenAI{BaseURL: srv.URL, APIKey: "k", Model: "ahead-model"}}
	}, app.WithPGTracer(hold))
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"})).Typed(t)
	ctx := context.Background()
	// The namespace's first write reads its policy; the next ones find it in the process.
	if _, err := c.Set(ctx, ns, "harbour", client.SetRequest{Value: "the harbour opens at dawn"}); err != nil {
		t.Fatal(err)
	}
	hold.mu.Lock()
	hold.armed = true
	hold.mu.Unlock()
	a, err := c.Set(ctx, ns, "keeper", client.SetRequest{Value: value})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Written || a.Verdict != "new" {
		t.Fatalf("the write: %+v", a)
	}
	if hold.heldFor >= hold.patience {
		t.Fatalf("the embedder was not asked for the value while the round read the key's heads (held %v)", hold.heldFor)
	}
	found, err := c.Search(ctx, ns, client.SearchRequest{Query: value, TopK: 1})
	if err != nil || len(found.Hits) != 1 || found.Hits[0].MemoryKey != "keeper" {
		t.Fatalf("search for the value written with the vectors asked ahead: %v %+v", err, found)
	}
}

// What the round's read decides still decides whether a value is embedded: a revision
// that names no type over a profile head stays a profile (never searched, never a
// peer), whatever was asked of the embedder before the read; and a high-sensitivity
// value never reaches the embedder.
func TestTheRoundsReadStillDecidesWhatIsEmbedded(t *testing.T) {
	srv := llmtest.New(t)
	srv.EmbedDim(64)
	ns := testenv.Unique(t, "ahead-kept")
	n, url := env.API(t, func(c *config.Config) {
		c.Embedder = config.Embedder{Kind: "openai", Dim: 64, OpenAI: config.OpenAI{BaseURL: srv.URL, APIKey: "k", Model: "ahead-model"}}
	})
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"})).Typed(t)
	ctx := context.Background()
	if _, err := c.Set(ctx, ns, "about-me", client.SetRequest{Value: "prefers window seats", MemoryType: "profile"}); err != nil {
		t.Fatal(err)
	}
	const revised = "prefers aisle seats on long flights"
	a, err := c.Set(ctx, ns, "about-me", client.SetRequest{Value: revised})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Written || a.MemoryType != "profile" {
		t.Fatalf("the revision over the profile head: %+v", a)
	}
	const secret = "the vault combination is nine nine four"
	if _, err := c.Set(ctx, ns, "vault", client.SetRequest{Value: secret, Sensitivity: "high"}); err != nil {
		t.Fatal(err)
	}
	// A searchable write after both: once search finds it, the index holds the two before.
	if _, err := c.Set(ctx, ns, "aisle-fact", client.SetRequest{Value: "the aisle seats on long flights are in row nine"}); err != nil {
		t.Fatal(err)
	}
	found, err := c.Search(ctx, ns, client.SearchRequest{Query: revised, TopK: 5})
	if err != nil || len(found.Hits) == 0 || found.Hits[0].MemoryKey != "aisle-fact" {
		t.Fatalf("search after the writes: %v %+v", err, found)
	}
	for _, h := range found.Hits {
		if h.MemoryKey == "about-me" || h.MemoryKey == "vault" {
			t.Errorf("search served %s, which has no search document", h.MemoryKey)
		}
	}
	for _, r := range srv.Requests() {
		if r.Embed != nil && slices.ContainsFunc(r.Embed.Input, func(in string) bool { return strings.Contains(in, "vault combination") }) {
			t.Errorf("the embedder was sent the high-sensitivity value: %q", r.Embed.Input)
		}
	}
}
