package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/loomplane/loom/client"
)

// searchCorpusVersion names the search scenario's corpus: bump it when the values a
// size's corpus holds change (sentence, words, loadKey), so a namespace loaded by an
// older bench is never taken for the new corpus.
const searchCorpusVersion = 1

// searchCorpusNamespace names the namespace of the search scenario's corpus of size
// memories. Unlike the run's other namespaces it carries no run id: its values are
// drawn from a generator seeded by the size alone, so every run's corpus of a size is
// the same, and a run on stores that outlive it (`--dir`, configured stores) searches
// the one an earlier run loaded instead of loading 100,000 memories again.
func searchCorpusNamespace(size int) string {
	return fmt.Sprintf("bench-corpus%d-search-%d", searchCorpusVersion, size)
}

// searchCorpusValues are the values of the search corpus of size memories, in key
// order (loadKey(0), loadKey(1), …).
func searchCorpusValues(size int) []string {
	rng := rand.New(rand.NewPCG(uint64(size), searchCorpusVersion))
	values := make([]string, size)
	for i := range values {
		values[i] = sentence(rng)
	}
	return values
}

// loadCorpus makes ns hold values at keys loadKey(0..): when it already holds every
// one of them (holdsCorpus), as an earlier run on the same stores left it, it loads
// nothing; else it writes them all, as loadValues does.
func (r *runner) loadCorpus(ctx context.Context, ns string, values []string) error {
	start := time.Now()
	held, err := r.holdsCorpus(ctx, ns, values)
	if err != nil {
		return err
	}
	if held {
		r.progress("  %s already holds the %d memories of the corpus (every key read and its value compared in %s): not loaded again",
			ns, len(values), time.Since(start).Round(100*time.Millisecond))
		return nil
	}
	return r.loadEntries(ctx, ns, values)
}

// holdsCorpus says whether ns serves exactly values: memory.bulk_get of every key
// loadKey(0..len(values)-1), a thousand at a time, finds each with its value, and
// finds no loadKey(len(values)). It stops at the first batch that differs, so a
// namespace that is new or holds another corpus costs one read.
func (r *runner) holdsCorpus(ctx context.Context, ns string, values []string) (bool, error) {
	const batch = 1000
	read := func(from, n int) (*client.BulkGetAnswer, error) {
		keys := make([]client.BulkGetKey, n)
		for i := range keys {
			keys[i] = client.BulkGetKey{MemoryKey: loadKey(from + i)}
		}
		ans, err := r.api.BulkGet(ctx, ns, client.BulkGetRequest{Keys: keys})
		if err != nil {
			return nil, fmt.Errorf("read %s's keys %d.. to check its corpus: %w", ns, from, err)
		}
		return ans, nil
	}
	for from := 0; from < len(values); from += batch {
		n := min(batch, len(values)-from)
		ans, err := read(from, n)
		if err != nil {
			return false, err
		}
		if len(ans.Memories) != n {
			return false, nil
		}
		for _, m := range ans.Memories {
			var i int
			var value string
			if _, err := fmt.Sscanf(m.MemoryKey, "k%07d", &i); err != nil || i < from || i >= from+n {
				return false, nil
			}
			if err := json.Unmarshal(m.Value, &value); err != nil || value != values[i] {
				return false, nil
			}
		}
	}
	past, err := read(len(values), 1)
	if err != nil {
		return false, err
	}
	return len(past.Memories) == 0, nil
}

// settleUsage waits until the usage an earlier run's searches of ns left owed is
// folded: its recalls are held for LOOM_USAGE_RECALL_INTERVAL_MS, so a run on the
// same stores finds them due at its start, and their usage_fold revisions (one a
// memory served) would land among its measured searches. It waits for no row of ns
// in loom.memory_touches past the interval and no usage_fold item of ns owed, twice
// in a row a second apart (a published record is queued as items by the fold's feed
// a moment later), then for the index to apply the folds.
func (r *runner) settleUsage(ctx context.Context, ns string) error {
	p := r.t.Process
	age := p.Cfg.Command.RecallPublishInterval.Seconds()
	start, quiet := time.Now(), 0
	err := r.waitUntil(ctx, "the usage an earlier run left owed in "+ns, 5*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		var owed int64
		err := p.PG.QueryRow(ctx, `SELECT (SELECT count(*) FROM loom.memory_touches WHERE org = $1 AND namespace = $2
				AND (touches > 0 OR evidence > 0 OR first_at <= now() - $3::float8 * interval '1 second'))
			+ (SELECT count(*) FROM loom.worker_items WHERE worker = 'usage_fold' AND org = $1 AND namespace = $2 AND state = 'owed')`,
			r.t.Org, ns, age).Scan(&owed)
		if err != nil {
			return false, err
		}
		if owed > 0 {
			quiet = 0
			return false, nil
		}
		quiet++
		return quiet >= 2, nil
	})
	if err != nil {
		return err
	}
	if _, err := r.settleIndex(ctx, ns); err != nil {
		return err
	}
	r.progress("    no usage of %s owed (%s)", ns, time.Since(start).Round(100*time.Millisecond))
	return nil
}
