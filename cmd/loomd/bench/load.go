package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/watermarks"
)

// workerRands gives each of n workers its own generator (a *rand.Rand is not safe
// for concurrent use), seeded from the runner's.
func (r *runner) workerRands(n int) []*rand.Rand {
	out := make([]*rand.Rand, n)
	for i := range out {
		out[i] = rand.New(rand.NewPCG(r.rng.Uint64(), uint64(i)))
	}
	return out
}

// appendOnly configures namespaces to keep every write as written, unjudged: for
// scenarios that measure the pipeline or the reads, not the verdicts.
func (r *runner) appendOnly(ctx context.Context, namespaces ...string) error {
	for _, ns := range namespaces {
		if _, err := r.api.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
			return fmt.Errorf("configure %s append_only: %w", ns, err)
		}
	}
	return nil
}

// bulkEntries makes n entries keyed key(i) for i in [from, from+n), with values of
// the vocabulary.
func (r *runner) bulkEntries(from, n int, key func(int) string) []client.BulkEntry {
	entries := make([]client.BulkEntry, n)
	for j := range entries {
		entries[j] = client.BulkEntry{Key: key(from + j), Value: sentence(r.rng)}
	}
	return entries
}

// loadKey names the i-th memory a loader writes.
func loadKey(i int) string { return fmt.Sprintf("k%07d", i) }

// load writes n memories (keys loadKey(0..n-1)) into ns with memory.bulk_set, at most
// BulkEntries at a time, and waits until the projection holds each batch before
// sending the next: a bulk write checks the revisions between the projection and its
// commit, and a loader running ahead of the projector would measure that check's
// refusal instead of loading.
func (r *runner) load(ctx context.Context, ns string, n int) error {
	_, err := r.loadValues(ctx, ns, n)
	return err
}

// loadValues is load, returning the values it wrote in key order.
func (r *runner) loadValues(ctx context.Context, ns string, n int) ([]string, error) {
	values := make([]string, n)
	for i := range values {
		values[i] = sentence(r.rng)
	}
	return values, r.loadEntries(ctx, ns, values)
}

// loadEntries writes values[i] at loadKey(i) into ns with memory.bulk_set, as load
// does. Each batch's Idempotency-Key is this load's own (a retry is answered with the
// first answer), not one a later load of the same namespace (the search corpus) would
// be answered from without writing.
func (r *runner) loadEntries(ctx context.Context, ns string, values []string) error {
	n := len(values)
	batch := min(r.opts.BulkEntries, 1000)
	load := r.rng.Uint64()
	start := time.Now()
	r.progress("  loading %d memories into %s (memory.bulk_set of %d)", n, ns, batch)
	said := time.Now()
	for from := 0; from < n; from += batch {
		entries := make([]client.BulkEntry, min(batch, n-from))
		for j := range entries {
			entries[j] = client.BulkEntry{Key: loadKey(from + j), Value: values[from+j]}
		}
		var ans *client.BulkAnswer
		if err := r.retrying(ctx, func() (err error) {
			ans, err = r.api.BulkSet(ctx, ns, client.BulkSetRequest{Entries: entries}, client.IdempotencyKey(fmt.Sprintf("%s-%x-%d", ns, load, from)))
			return err
		}); err != nil {
			return fmt.Errorf("load %s: bulk_set of keys %d..: %w", ns, from, err)
		}
		// An entry the namespace already holds as written (a corpus loaded again over
		// part of itself) is skipped as unchanged.
		if len(ans.Written)+len(ans.SkippedUnchanged) != len(entries) {
			return fmt.Errorf("load %s: bulk_set wrote %d of %d entries (%d unchanged)", ns, len(ans.Written), len(entries), len(ans.SkippedUnchanged))
		}
		if err := r.waitProjected(ctx, ns); err != nil {
			return err
		}
		if time.Since(said) >= 5*time.Second {
			r.progress("    %d of %d loaded, %s", from+len(entries), n, time.Since(start).Round(time.Second))
			said = time.Now()
		}
	}
	r.progress("    %d loaded in %s (%.0f/s, projected)", n, time.Since(start).Round(100*time.Millisecond), float64(n)/time.Since(start).Seconds())
	return nil
}

// loadRetries is how many times a loader sends a write the server refused as
// retryable (a busy machine's 503) before it gives up.
const loadRetries = 5

// retrying runs a setup write until it succeeds, is refused for good, or has been
// refused as retryable loadRetries times, waiting 1, 2, 4 … seconds in between. The
// write carries an Idempotency-Key, so a retry of one that committed after all is
// answered with its first answer instead of writing again.
func (r *runner) retrying(ctx context.Context, write func() error) error {
	wait := time.Second
	for attempt := 1; ; attempt++ {
		err := write()
		if _, retryable, _ := callKind(err); err == nil || !retryable || attempt == loadRetries {
			return err
		}
		r.progress("    %v; retrying in %s", err, wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// waitProjected waits until the serving projection's watermark of ns reaches the
// namespace's generation: everything committed so far is searchable.
func (r *runner) waitProjected(ctx context.Context, ns string) error {
	return r.waitUntil(ctx, "the projection of "+ns, 5*time.Minute, 20*time.Millisecond, func(ctx context.Context) (bool, error) {
		gen, mark, err := r.generationAndWatermark(ctx, ns)
		return mark >= gen, err
	})
}

// generationAndWatermark reads a namespace's last committed seq and the highest seq
// the serving projection has written.
func (r *runner) generationAndWatermark(ctx context.Context, ns string) (gen, mark int64, err error) {
	gen, err = generations.Read(ctx, r.t.Process.PG, r.t.Org, ns)
	if err == nil {
		mark, err = watermarks.Read(ctx, r.t.Process.PG, r.t.Process.Cfg.Pipeline.Projection, r.t.Org, ns)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read the generation and watermark of %s: %w", ns, err)
	}
	return gen, mark, nil
}
