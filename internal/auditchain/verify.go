package auditchain

import "fmt"

// Checkpoint is one row of loom.audit_checkpoints: the audit row a verified walk
// reached, chained after the checkpoint before.
type Checkpoint struct {
	Org, Namespace string
	Seq            int64
	RowHash        string
	RowsVerified   int64
	Prev           string
	Hash           string
}

// Break is the first broken link of a namespace's chain.
type Break struct {
	Org, Namespace string
	Seq            uint64 // the audit row (or checkpoint) where the chain breaks
	Reason         string
}

func (b *Break) Error() string {
	return fmt.Sprintf("audit chain of %s/%s broken at seq %d: %s", b.Org, b.Namespace, b.Seq, b.Reason)
}

// Walker walks one namespace's audit rows in seq order against its checkpoints. A link
// may be missing only below an erasure that purged the scope's audit rows (MaxPurge):
// its deleted rows leave the next row's prev_hash naming a row that is gone.
type Walker struct {
	org, namespace string
	maxPurge       uint64 // the highest seq of a purge's own audit row; 0 when none
	checkpoints    []Checkpoint
	next           int // the first checkpoint not yet met
	prevCheckpoint string

	lastSeq  uint64
	lastHash string
	chained  bool // a hashed row was seen: every later row must be hashed
	// blanked holds, per memory id, the first row whose subject is blank under a
	// commitment that no erasure or redaction after it has explained yet (noteBlank).
	blanked map[string]uint64

	Rows, Legacy, CheckpointsMet int64
}

// NewWalker starts a walk of the namespace from its first row; checkpoints are the
// namespace's, in seq order.
func NewWalker(org, namespace string, maxPurge uint64, checkpoints []Checkpoint) *Walker {
	return &Walker{org: org, namespace: namespace, maxPurge: maxPurge, checkpoints: checkpoints}
}

// From starts the walk after a verified checkpoint (the pass's): the rows after it must
// link to its row hash.
func (w *Walker) From(c Checkpoint) {
	w.lastSeq, w.lastHash, w.chained, w.prevCheckpoint = uint64(c.Seq), c.RowHash, true, c.Hash
}

// LastRow is the seq and hash of the last row walked.
func (w *Walker) LastRow() (uint64, string) { return w.lastSeq, w.lastHash }

func (w *Walker) broken(seq uint64, format string, args ...any) *Break {
	return &Break{Org: w.org, Namespace: w.namespace, Seq: seq, Reason: fmt.Sprintf(format, args...)}
}

// purged reports whether rows below seq may have been deleted by a purge.
func (w *Walker) purged(seq uint64) bool { return w.maxPurge > seq }

// Step walks one row.
func (w *Walker) Step(r Row) *Break {
	if b := w.checkpointsBefore(r.Seq); b != nil {
		return b
	}
	w.Rows++
	if r.RowHash == "" {
		if w.chained {
			return w.broken(r.Seq, "the row carries no hash, after rows that do")
		}
		w.Legacy++
		w.lastSeq = r.Seq
		return nil
	}
	if got := Hash(r.PrevHash, r); got != r.RowHash {
		return w.broken(r.Seq, "the row's fields do not hash to its row_hash (stored %s, computed %s): the row was changed", short(r.RowHash), short(got))
	}
	if why := checkSubject(r); why != "" {
		return w.broken(r.Seq, "%s", why)
	}
	w.noteBlank(r)
	if r.PrevHash != w.lastHash && !w.purged(w.lastSeq+1) {
		if w.lastHash == "" && !w.chained {
			return w.broken(r.Seq, "the first chained row names a previous row (%s) the namespace does not hold", short(r.PrevHash))
		}
		return w.broken(r.Seq, "prev_hash %s does not name the row before it (seq %d, row_hash %s): a row between was changed, removed or inserted",
			short(r.PrevHash), w.lastSeq, short(w.lastHash))
	}
	w.chained, w.lastSeq, w.lastHash = true, r.Seq, r.RowHash
	// A checkpoint names the last row of its seq; a seq's other row, before it in op
	// order, passes it by (checkpointsBefore finds a checkpoint no row of its seq met).
	if w.next < len(w.checkpoints) && uint64(w.checkpoints[w.next].Seq) == r.Seq && w.checkpoints[w.next].RowHash == r.RowHash {
		if b := w.meet(w.checkpoints[w.next]); b != nil {
			return b
		}
	}
	return nil
}

// Finish checks the checkpoints past the last row: each names a row that must exist;
// and that every blanked subject was explained by a row after it (noteBlank).
func (w *Walker) Finish() *Break {
	if b := w.checkpointsBefore(^uint64(0)); b != nil {
		return b
	}
	var first uint64
	for _, seq := range w.blanked {
		if first == 0 || seq < first {
			first = seq
		}
	}
	if first != 0 {
		return w.broken(first, "the row's key, content hash and user id are blank under a subject commitment, and no erasure of the "+
			"namespace nor redaction of the memory follows it in the chain: its subject was blanked by hand (or, if the projection "+
			"is behind, that row is not projected yet: verify again once it caught up)")
	}
	return nil
}

// noteBlank tells a scrub forged by blanking a row's subject (its key, content hash,
// user id and salt all at once, which checkSubject cannot tell from an erasure's) from
// the ones Loom makes. Loom blanks a subject only below a record that leaves its own
// row later in the same chain: an erasure scrubs the scope's rows below its
// memory.erased record (whose row is OpErasure), and a redaction's scrub blanks its
// versions' rows, as a replay writes blank the revisions whose data keys an erasure or
// a redaction destroyed, the redaction's memory.redacted row naming the same memory. So a blank row waits for such a row; one
// still waiting when the walk ends is a break (Finish). A forged blank below a real
// erasure of the namespace passes: the erasure's row does not say whose rows it took.
// A replay or a lagging projection can write a blank row a batch before the row that
// explains it: a walk between the two batches breaks, and says so.
func (w *Walker) noteBlank(r Row) {
	if r.Op == OpErasure && r.EventType == EventErased {
		clear(w.blanked)
		return
	}
	if r.SubjectCommitment != "" && subjectScrubbed(r) {
		if w.blanked == nil {
			w.blanked = map[string]uint64{}
		}
		if _, ok := w.blanked[r.MemoryID]; !ok {
			w.blanked[r.MemoryID] = r.Seq
		}
	}
	if r.EventType == EventRedacted {
		delete(w.blanked, r.MemoryID)
	}
}

// checkpointsBefore meets the checkpoints below seq, whose rows the walk passed
// without finding: they must have been purged. One at the last seq walked was not
// met by any row of it: its row was changed.
func (w *Walker) checkpointsBefore(seq uint64) *Break {
	for w.next < len(w.checkpoints) && uint64(w.checkpoints[w.next].Seq) < seq {
		c := w.checkpoints[w.next]
		switch {
		case w.purged(uint64(c.Seq)):
		case uint64(c.Seq) == w.lastSeq && w.lastHash != "":
			return w.broken(uint64(c.Seq), "no row of this seq holds the hash checkpointed at it (%s; the last holds %s): the chain was rewritten",
				short(c.RowHash), short(w.lastHash))
		case uint64(c.Seq) >= w.lastSeq:
			return w.broken(uint64(c.Seq), "the row checkpointed at this seq (%s) is missing from ClickHouse", short(c.RowHash))
		}
		if b := w.meet(c); b != nil {
			return b
		}
	}
	return nil
}

// meet checks a checkpoint's own link in the checkpoint chain.
func (w *Walker) meet(c Checkpoint) *Break {
	w.next++
	if c.Prev != w.prevCheckpoint || CheckpointHash(c.Prev, c.Org, c.Namespace, c.Seq, c.RowHash) != c.Hash {
		return w.broken(uint64(c.Seq), "the checkpoint at this seq does not chain after the one before it in loom.audit_checkpoints")
	}
	w.prevCheckpoint = c.Hash
	w.CheckpointsMet++
	return nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	if h == "" {
		return "''"
	}
	return h
}
