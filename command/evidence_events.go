package command

import (
	"context"
	"time"
)

// Evidence events (memory-architecture, "Background passes", usage_fold: the absolute
// evidence_count on memory; memory.import's reinforce=False: "no restatement, merge or
// identity duplicate records an evidence event"). A memory.set (or memory.update) that
// restates a row, is merged into one or is written as a duplicate of one is evidence
// for that row's statement: it counts one on the row in loom.memory_touches
// (touches_store.go), which the usage fold folds into the row's evidence_count as it
// folds touches. The count is fire-and-forget after the answer, as search's recalls
// are: a lost count is a missed report, never a failed write. A dry run, and a replay
// of an Idempotency-Key (which answers the stored answer), count nothing.

// evidenceCountTimeout bounds the count's one statement.
const evidenceCountTimeout = 5 * time.Second

// evidenceOf is the memory a write's answer is evidence for, "" when none.
func evidenceOf(ans *setAnswer) string {
	if ans == nil || ans.DryRun {
		return ""
	}
	switch ans.Verdict {
	case VerdictRestatement:
		if ans.Written {
			return ans.MemoryID
		}
	case VerdictMerge:
		if ans.MergedInto != nil {
			return ans.MergedInto.MemoryID
		}
	case VerdictDuplicate:
		if ans.Written {
			return ans.DuplicateOf
		}
	}
	return ""
}

// countEvidence counts the evidence event a write's answer names, off the write's path.
func (s *Service) countEvidence(org, ns string, ans *setAnswer) {
	id := evidenceOf(ans)
	if id == "" {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), evidenceCountTimeout)
		defer cancel()
		if err := s.recordEvidence(ctx, org, ns, id); err != nil {
			s.log.Warn("memory.set: counting an evidence event failed; it is not counted", "org", org, "namespace", ns, "memory_id", id, "err", err)
		}
	}()
}
