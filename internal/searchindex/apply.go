package searchindex

import (
	"slices"

	"github.com/loomplane/loom/internal/gapless"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/text"
)

// Applied is what one Apply did to a namespace's position.
type Applied struct {
	Position   int64 // the highest seq with nothing missing below it
	Advanced   int   // seqs that moved it
	Duplicates int   // seqs at or below it before the call
	Gap        bool  // a seq was left past a gap
}

// apply applies a namespace's records, in stream order, and moves its position by the
// gapless rule. A record at or below the position was applied before (or withdrawn by an
// erasure that jumped over it) and is skipped. Documents are ordered by version per
// identity, so a record seen twice, or an older revision after a newer one, changes
// nothing: what ReplacingMergeTree(version) keeps is what the index keeps (of one
// version, the later seq: an amendment).
func (s *space) apply(recs []Record, stems *text.Stems) Applied {
	seqs := make([]int64, 0, len(recs))
	var jumps map[int64]bool
	var byID map[[16]byte]int32 // memory_id → slot, built on the first sealed revision or redaction
	memoryIDs := func() map[[16]byte]int32 {
		if byID == nil {
			byID = map[[16]byte]int32{}
			for slot := range s.docs {
				if s.cards[slot].has(flagLive) {
					byID[s.docs[slot].memoryID] = int32(slot)
				}
			}
		}
		return byID
	}
	for _, rec := range recs {
		seqs = append(seqs, rec.Seq)
		s.last = max(s.last, rec.Seq)
		if rec.Jump || rec.Erasure != nil {
			if jumps == nil {
				jumps = map[int64]bool{}
			}
			jumps[rec.Seq] = true
		}
		if rec.Seq <= s.pos {
			continue
		}
		switch {
		case rec.Erasure != nil:
			s.erase(*rec.Erasure)
			byID = nil
		case rec.Redaction != nil:
			if s.held {
				s.redact(*rec.Redaction, memoryIDs())
			}
		case rec.Revision == nil:
		case rec.Revision.Sealed:
			if s.held {
				s.retire(rec.Revision, memoryIDs())
			}
		default:
			if s.held {
				if slot := s.revise(rec.Revision, stems); slot >= 0 && byID != nil {
					byID[s.docs[slot].memoryID] = slot
				}
			}
		}
	}
	next, advanced, dupes, gap := gapless.Advance(s.pos, seqs, jumps)
	if next > s.pos {
		s.pos = next
		close(s.changed)
		s.changed = make(chan struct{})
	}
	if s.held {
		s.maybeCompactPostings()
		for _, a := range s.arenas {
			if a.needsCompaction() {
				s.compact(a)
			}
		}
	}
	return Applied{Position: s.pos, Advanced: advanced, Duplicates: dupes, Gap: gap}
}

func (s *space) fenced(user string, seq int64) bool {
	return seq < s.fenceAll || seq < s.fenceUser[user]
}

// revise applies an opened revision to its identity's document and returns the slot it
// wrote, or -1.
func (s *space) revise(r *Revision, stems *text.Stems) int32 {
	if s.fenced(r.UserID, r.Seq) {
		return -1
	}
	slot, found := s.find(r.Agent, r.UserID, r.SessionID, r.MemoryKey)
	if found && !s.docs[slot].olderThan(r.Version, r.Seq) {
		return -1
	}
	if !found {
		slot = s.alloc(r.MemoryKey)
		c := &s.cards[slot]
		c.agent, c.user, c.session = s.names.id(r.Agent), s.names.id(r.UserID), s.names.id(r.SessionID)
	}
	d, c := &s.docs[slot], &s.cards[slot]
	sha := parseSHA(r.ContentSHA256)
	sameContent := found && c.has(flagContent) && d.sha == sha
	searchable := !r.Tombstone && r.Sensitivity != string(memrow.SensitivityHigh) && !memrow.NonSearchableTypes[r.MemoryType]
	// A copy (a status mark, a pin) whose text and tags are its head's keeps the terms
	// and postings it has: only its plain fields change.
	sameTerms := sameContent && searchable && s.sameTags(slot, r.Tags)
	s.setPlain(slot, r, sha)
	if !sameTerms {
		s.dropTerms(slot)
	}
	if !searchable {
		s.dropVector(slot)
		s.dropChunks(slot)
		return slot
	}
	if !sameTerms {
		s.setTerms(slot, r, stems)
	}
	switch {
	case len(r.Vector) > 0:
		s.dropVector(slot)
		if int(c.dim) != len(r.Vector) {
			s.dropChunks(slot)
		}
		a := s.arena(len(r.Vector))
		c.dim, c.vecRow = uint16(len(r.Vector)), a.add(r.Vector, slot)
		a.values++
	case r.EmbeddingDim > 0 && sameContent:
		// a copy: the content's vector stays
	default:
		s.dropVector(slot)
	}
	switch {
	case len(r.ChunkVectors) > 0 && len(r.ChunkVectors[0]) == int(c.dim) && c.dim > 0:
		s.dropChunks(slot)
		n := min(len(text.Chunks(r.Text)), len(r.ChunkVectors), 255)
		a := s.arena(int(c.dim))
		for i := 0; i < n; i++ {
			row := a.add(r.ChunkVectors[i], slot)
			if i == 0 {
				d.chunkRow = row
			}
		}
		c.nChunks = uint8(n)
	case sameContent:
		// a copy: windows of the same content stay
	default:
		s.dropChunks(slot)
	}
	return slot
}

// sameTags reports whether a document's tags are tags, in the same order (the order
// setTerms keeps them in).
func (s *space) sameTags(slot int32, tags []string) bool {
	held := s.docs[slot].tags()
	if len(held) != len(tags) {
		return false
	}
	for i, t := range tags {
		if id, ok := s.names.lookup(t); !ok || id != held[i] {
			return false
		}
	}
	return true
}

func (s *space) setPlain(slot int32, r *Revision, sha [32]byte) {
	d := &s.docs[slot]
	c := &s.cards[slot]
	d.memoryID, d.sha = parseUUID(r.MemoryID), sha
	d.version, d.seq = r.Version, r.Seq
	c.memType, d.sensitivity, c.status = s.names.id(r.MemoryType), s.names.id(r.Sensitivity), statusID(r.Status)
	d.updated = r.UpdatedAt.Unix()
	c.expires, c.validTo = never, never
	if r.ExpiresAt != nil {
		c.expires = r.ExpiresAt.Unix()
	}
	if r.ValidTo != nil {
		c.validTo = r.ValidTo.Unix()
	}
	c.flags &^= flagTomb | flagPinned
	if r.Tombstone {
		c.flags |= flagTomb
	}
	if r.Pinned {
		c.flags |= flagPinned
	}
}

// retire applies a revision whose content is gone: the document of its memory keeps its
// place at the new version, with nothing searchable.
func (s *space) retire(r *Revision, byID map[[16]byte]int32) {
	if s.fenced(r.UserID, r.Seq) {
		return
	}
	slot, ok := byID[parseUUID(r.MemoryID)]
	if !ok || !s.docs[slot].olderThan(r.Version, r.Seq) {
		return
	}
	s.dropContent(slot)
	s.setPlain(slot, r, parseSHA(r.ContentSHA256))
}

// redact drops the content of a redacted version.
func (s *space) redact(x Redaction, byID map[[16]byte]int32) {
	slot, ok := byID[parseUUID(x.MemoryID)]
	if ok && slices.Contains(x.Versions, s.docs[slot].version) {
		s.dropContent(slot)
	}
}

// erase forgets the scope's documents below the fence, and keeps the fence: a revision of
// the scope below it that arrives later (a redelivery) is not applied.
func (s *space) erase(f Fence) {
	if f.UserID == "" {
		s.fenceAll = max(s.fenceAll, f.Seq)
	} else {
		s.fenceUser[f.UserID] = max(s.fenceUser[f.UserID], f.Seq)
	}
	if !s.held {
		return
	}
	user, known := s.names.lookup(f.UserID)
	if f.UserID != "" && !known {
		return
	}
	for slot := range s.docs {
		d := &s.docs[slot]
		c := &s.cards[slot]
		if c.has(flagLive) && d.seq < f.Seq && (f.UserID == "" || c.user == user) {
			s.remove(int32(slot))
		}
	}
}

// olderThan reports whether a revision at version and seq is newer than the document:
// a higher version, or the same version at a later seq (the entity extractor amends a
// version's metadata under a seq of its own, keeping the version).
func (d *doc) olderThan(version, seq int64) bool {
	return d.version < version || (d.version == version && d.seq < seq)
}
