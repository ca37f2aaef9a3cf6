package query

import (
	"context"
	"time"

	"github.com/loomplane/loom/internal/ttlcache"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/metrics"
)

// cachedEmbedder embeds a query once per (model, text) within the TTL, so a repeated
// query pays no embed.
type cachedEmbedder struct {
	embed.Embedder
	cache  *ttlcache.Cache[string, []float32]
	hits   *metrics.Counter
	misses *metrics.Counter
}

func newCachedEmbedder(e embed.Embedder, size int, ttl time.Duration, reg *metrics.Registry) *cachedEmbedder {
	if size <= 0 {
		size = 4096
	}
	c := reg.Counter("loom_query_embedding_cache_total", "Query embeddings served from the cache or embedded.", "result")
	return &cachedEmbedder{Embedder: e, cache: ttlcache.New[string, []float32](size, ttl),
		hits: c.With("hit"), misses: c.With("miss")}
}

func (c *cachedEmbedder) query(ctx context.Context, text string) ([]float32, error) {
	key := c.Model() + "\x00" + text
	if v, ok := c.cache.Get(key); ok {
		c.hits.Inc()
		return v, nil
	}
	c.misses.Inc()
	vs, err := c.Embed(ctx, []string{text})
	if err != nil {
		return nil, err
	}
	c.cache.Add(key, vs[0])
	return vs[0], nil
}
