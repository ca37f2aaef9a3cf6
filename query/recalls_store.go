package query

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// Search's exposures (memory-architecture, "Background passes", usage_fold): each
// memory a search serves (memory.search, and the reads built on it: memory.ask,
// context.pack, memory.related) counts one recall in loom.memory_touches' recalls
// column, which the command role publishes in the namespace's memory.usage_recorded
// record (a memory's recalls at most once per LOOM_USAGE_RECALL_INTERVAL_MS,
// command/touches_store.go) and the usage fold folds into the row's recall_count as it folds touches
// (command/touches_store.go owns the table's other statements). The counts gather in
// the process and one insert a second writes them, as the seed's exposure rows are fired
// and forgotten: a search never waits for them nor fails on them, and a count lost to a
// failure is logged and gone; a process that stops writes what it gathered as it stops
// (FlushRecalls). A later page of the same search counts nothing (its hits were the
// first page's pool).

// recallWait bounds the exposures' insert; recallFlush is how long counts gather before
// one insert writes them all: a hot memory served by a hundred searches a second is one
// row update a second, not a hundred contending for its row lock.
const (
	recallWait  = 5 * time.Second
	recallFlush = time.Second
)

// recallKey is one memory's exposures' row.
type recallKey struct{ org, namespace, memoryID string }

// recallCounts gathers the served hits' recalls until the next flush.
type recallCounts struct {
	mu        sync.Mutex
	pending   map[recallKey]int64
	scheduled bool
}

// recordRecalls counts one recall of each memory among hits; a flush within recallFlush
// writes them.
func (s *Service) recordRecalls(ctx context.Context, org string, hits []hitView) {
	if !s.cfg.RecordRecalls || len(hits) == 0 {
		return
	}
	rc := &s.recalls
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.pending == nil {
		rc.pending = map[recallKey]int64{}
	}
	seen := map[recallKey]bool{}
	for _, h := range hits {
		k := recallKey{org, h.Namespace, h.MemoryID}
		if h.MemoryID == "" || seen[k] {
			continue
		}
		seen[k] = true
		rc.pending[k]++
	}
	if !rc.scheduled && len(rc.pending) > 0 {
		rc.scheduled = true
		time.AfterFunc(recallFlush, s.flushRecalls)
	}
}

// recallColumns are the counts as the flush's arrays, in (org, namespace, memory)
// order: the upsert locks rows in its input's order, so two processes' flushes over
// the same memories lock them in one order and cannot deadlock (a map's order did).
func recallColumns(pending map[recallKey]int64) (orgs, nss, ids []string, counts []int64) {
	keys := make([]recallKey, 0, len(pending))
	for k := range pending {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b recallKey) int {
		return cmp.Or(cmp.Compare(a.org, b.org), cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.memoryID, b.memoryID))
	})
	for _, k := range keys {
		orgs, nss, ids, counts = append(orgs, k.org), append(nss, k.namespace), append(ids, k.memoryID), append(counts, pending[k])
	}
	return orgs, nss, ids, counts
}

// FlushRecalls writes the counts gathered so far now. The process calls it as it
// stops, before its pool closes: the flush its timer would run within the second would
// find the pool closed and lose them.
func (s *Service) FlushRecalls() { s.flushRecalls() }

// flushRecalls writes the gathered counts in one statement; a failure loses them, and
// says so.
func (s *Service) flushRecalls() {
	rc := &s.recalls
	rc.mu.Lock()
	pending := rc.pending
	rc.pending, rc.scheduled = nil, false
	rc.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	orgs, nss, ids, counts := recallColumns(pending)
	ctx, cancel := context.WithTimeout(context.Background(), recallWait)
	defer cancel()
	_, err := s.pool.Exec(ctx, `INSERT INTO loom.memory_touches (org, namespace, memory_id, touches, recalls)
		SELECT org, ns, id, 0, n FROM unnest($1::text[], $2::text[], $3::uuid[], $4::bigint[]) AS h(org, ns, id, n)
		ON CONFLICT (org, namespace, memory_id) DO UPDATE SET recalls = loom.memory_touches.recalls + excluded.recalls, last_at = now()`,
		orgs, nss, ids, counts)
	if err != nil {
		s.log.Warn("search: counting the served hits' recalls failed; they are not counted", "memories", len(ids), "err", err)
	}
}
