package query

import (
	"context"
	"time"
)

// Search's exposures (memory-architecture, "Background passes", usage_fold): each
// memory a search serves (memory.search, and the reads built on it: memory.ask,
// context.pack, memory.related) counts one recall in loom.memory_touches' recalls
// column, which the usage fold folds into the row's recall_count as it folds touches
// (command/touches_store.go owns the table's other statements). The insert is fired
// and forgotten, as the seed's exposure rows are: a search never waits for it nor fails
// on it, and a count lost to a failure is logged. A later page of the same search
// counts nothing (its hits were the first page's pool).

// recallWait bounds the exposure's insert.
const recallWait = 5 * time.Second

// recordRecalls counts one recall of each memory among hits, in the background.
func (s *Service) recordRecalls(ctx context.Context, org string, hits []hitView) {
	if !s.cfg.RecordRecalls || len(hits) == 0 {
		return
	}
	seen := map[[2]string]bool{}
	var nss, ids []string
	for _, h := range hits {
		k := [2]string{h.Namespace, h.MemoryID}
		if h.MemoryID == "" || seen[k] {
			continue
		}
		seen[k] = true
		nss, ids = append(nss, h.Namespace), append(ids, h.MemoryID)
	}
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recallWait)
	go func() {
		defer cancel()
		_, err := s.pool.Exec(ctx, `INSERT INTO loom.memory_touches (org, namespace, memory_id, touches, recalls)
			SELECT $1, ns, id, 0, 1 FROM unnest($2::text[], $3::uuid[]) AS h(ns, id)
			ON CONFLICT (org, namespace, memory_id) DO UPDATE SET recalls = loom.memory_touches.recalls + 1, last_at = now()`,
			org, nss, ids)
		if err != nil {
			s.log.Warn("search: counting the served hits' recalls failed; they are not counted", "org", org, "hits", len(ids), "err", err)
		}
	}()
}
