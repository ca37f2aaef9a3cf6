package command

import "github.com/loomplane/loom/events"

// batchNote is a bulk write's own audit row (memory-architecture, "memory.bulk_set":
// "One hash-only memory.bulk_set audit row records the write"): the principal, and
// the entries counted by what came of them. The commit adds the members, the seqs and
// memory ids of the revisions it writes (commitPlan.notedOn).
func (b *bulkWrite) batchNote(written []*entry) *events.AuditNote {
	counts := map[string]int{}
	for _, e := range written {
		counts[string(e.v.kind)]++
	}
	for name, n := range map[string]int{
		string(VerdictMerge): len(b.ans.Merged),
		"skipped_pinned":     len(b.ans.SkippedPinned),
		"skipped_locked":     len(b.ans.SkippedLocked),
		"skipped_unchanged":  len(b.ans.SkippedUnchanged),
		"blacklisted":        len(b.ans.Blacklisted),
		"replaced_in_batch":  len(b.ans.Replaced),
		"superseded":         len(b.ans.Superseded),
		"retired":            b.retiredCount(),
	} {
		if n > 0 {
			counts[name] = n
		}
	}
	if b.noteCounts != nil {
		for name, n := range b.noteCounts(written) {
			if n > 0 {
				counts[name] = n
			}
		}
	}
	return &events.AuditNote{Kind: events.AuditBatch, Op: b.opName(), Actor: b.p.Actor(), Verdicts: counts}
}

func (b *bulkWrite) retiredCount() int {
	n := 0
	for _, r := range b.retired {
		if r.retired {
			n++
		}
	}
	return n
}
