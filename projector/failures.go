package projector

import (
	"fmt"
	"sort"
)

// A record a projection cannot apply is recorded as a failure, with its reason, and
// the repair pass applies it later (repair.go). Its namespace is held meanwhile: every
// later record of the namespace is recorded as held rather than applied past it, so
// the namespace's watermark stays below the failure (its searches answer
// PROJECTION_BEHIND instead of reading a gap) and its graph is folded in seq order
// when the repair applies the lot. Other namespaces carry on.

// failure is one record a projection recorded rather than applied.
type failure struct {
	ns     nsKey
	ref    recordRef
	reason string
	// held: the record itself may be fine; it waits behind an earlier failure of its
	// namespace.
	held bool
}

// maxReason bounds a recorded reason: a driver's error can be long.
const maxReason = 1000

// failuresOf turns one namespace's share of a batch into failures: the seqs in failed
// with their reason, every other one held with heldReason. Seqs at or below the
// namespace's watermark are left out (the tables hold them already, and the watermark
// never waits for them); of two copies of a seq, the later one is kept.
func failuresOf(k nsKey, refs []recordRef, mark int64, failed map[int64]string, heldReason string) []failure {
	bySeq := map[int64]recordRef{}
	for _, r := range refs {
		if r.seq > mark {
			bySeq[r.seq] = r
		}
	}
	out := make([]failure, 0, len(bySeq))
	for seq, r := range bySeq {
		f := failure{ns: k, ref: r, reason: heldReason, held: true}
		if reason, ok := failed[seq]; ok {
			f.reason, f.held = reason, false
		}
		if len(f.reason) > maxReason {
			f.reason = f.reason[:maxReason]
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ref.seq < out[j].ref.seq })
	return out
}

// allFailed is failuresOf for a share that failed as a whole (its insert): every seq
// failed, with the same reason.
func allFailed(k nsKey, refs []recordRef, mark int64, reason string) []failure {
	failed := map[int64]string{}
	for _, r := range refs {
		failed[r.seq] = reason
	}
	return failuresOf(k, refs, mark, failed, "")
}

// heldBehindEarlier is the reason of a record held because its namespace already has
// recorded failures.
const heldBehindEarlier = "held behind an earlier failure of the namespace"

// heldBehind is the reason of a record held behind a failure in the same batch.
func heldBehind(seq int64) string {
	return fmt.Sprintf("held behind seq %d of the namespace, which failed", seq)
}

// setAside takes out of a batch the namespaces with a record whose content its key
// does not open, past the namespace's watermark: their records become failures (the
// unopened ones failed, the rest held behind the first of them). An unopened record
// at or below the watermark is only counted in skipped: the tables hold it already.
func setAside(b batch, rows []opened, bad []unopened, marks map[nsKey]int64) (batch, []opened, []failure, int) {
	failed := map[nsKey]map[int64]string{}
	skipped := 0
	for _, u := range bad {
		k := nsKey{u.env.Org, u.env.Namespace}
		if u.env.Seq <= marks[k] {
			skipped++
			continue
		}
		if failed[k] == nil {
			failed[k] = map[int64]string{}
		}
		failed[k][u.env.Seq] = u.err.Error()
	}
	if len(failed) == 0 {
		return b, rows, nil, skipped
	}
	drop := map[nsKey]bool{}
	for k := range failed {
		drop[k] = true
	}
	b, left := b.without(drop)
	kept := rows[:0:0]
	for _, o := range rows {
		if !drop[nsKey{o.env.Org, o.env.Namespace}] {
			kept = append(kept, o)
		}
	}
	var fs []failure
	for k, refs := range left {
		first := int64(-1)
		for seq := range failed[k] {
			if first < 0 || seq < first {
				first = seq
			}
		}
		fs = append(fs, failuresOf(k, refs, marks[k], failed[k], heldBehind(first))...)
	}
	return b, kept, fs, skipped
}
