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
