package command

import (
	"maps"
	"slices"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// Stage 4, the rows (set.go lists the stages): the judged entries become the rows one
// commit writes, their own and the copies of the heads their verdicts change.

// writeRows turns the written entries into the rows one commit writes: each entry's
// own row, marked as its verdict says, then one copy of every other head the verdicts
// change (a peer refined or in conflict, the key in another session of the same
// subject), each over the head it read and with every change to it applied once. A
// peer inside the batch is changed in place, a locked peer is left as it is, and a
// head the batch writes anew needs no copy. It returns the heads retired, once each.
func writeRows(op string, entries []*entry, policy string, now time.Time) ([]*pending, []string) {
	return buildRows(&copies{op: op}, entries, policy, now)
}

// writeJudgedRows is writeRows for one write whose gap check sends it back when any
// peer its verdict judged has a revision in the gap (gapCheck): a peer already flagged
// against the write's row gets no copy (flaggedAlready), since a peer whose head
// moved after it was read is caught there instead of by the copy's head lock. Only
// while every peer is a head this round read after its capture: a gap row an earlier
// round measured (absorbed) may be older than the head.
func writeJudgedRows(op string, e *entry, policy string, now time.Time) ([]*pending, []string) {
	return buildRows(&copies{op: op, skipFlagged: len(e.w.absorbed) == 0}, []*entry{e}, policy, now)
}

func buildRows(c *copies, entries []*entry, policy string, now time.Time) ([]*pending, []string) {
	c.inBatch, c.byKey = map[*memrow.Row]bool{}, map[string]*pending{}
	if len(entries) > 0 {
		// A copy a verdict writes is this request's act, never the earlier writer's
		// (postgres-authority.md, Audit: "never the earlier writer a copy carries").
		c.actor = entries[0].row.Actor
	}
	var rows []*pending
	for _, e := range entries {
		rows = append(rows, e.own(c.op, now))
		c.inBatch[e.row] = true
	}
	var superseded []string
	for _, e := range entries {
		e.superseded = nil
		e.markVerdict(c)
		e.markSameKey(c, policy, now)
		for _, id := range e.superseded {
			if !slices.Contains(superseded, id) {
				superseded = append(superseded, id)
			}
		}
	}
	written := map[string]bool{}
	for _, p := range rows {
		written[heads.IdentityKey(p.row.Identity)] = true
	}
	for _, k := range c.order {
		if !written[k] {
			rows = append(rows, c.byKey[k])
		}
	}
	return rows, superseded
}

// own is the entry's own row on its way to the commit, over the head it read.
func (e *entry) own(op string, now time.Time) *pending {
	p := &pending{own: true, op: op, event: events.TypeWritten, row: e.row, verdict: e.v.kind}
	if e.head != nil {
		p.readVersion, p.readSeq = e.head.Version, e.head.Seq
		if e.head.Live(now) {
			p.event = events.TypeRevised
		}
	}
	if e.row.Embedded() {
		p.vector, p.keyVector, p.chunkVectors = e.w.vector, e.w.keyVector, e.w.chunkVectors
	}
	return p
}

// markVerdict marks the entry's row and the peers its verdict changes. A proposal
// stays a proposal whatever its verdict: the verdict links it, and an owner's decision
// makes it a fact, so it retires and flags nothing.
func (e *entry) markVerdict(c *copies) {
	row, v := e.row, e.v
	proposed := row.Status == memrow.StatusProposed
	switch v.kind {
	case VerdictDuplicate:
		row.DuplicateOf = v.target.MemoryID
		if !proposed {
			row.Status = memrow.StatusDuplicate
		}
	case VerdictRefines:
		switch {
		case proposed:
			e.advise("proposal: a proposal retires nothing until it is accepted")
		case v.target.Locked:
			e.advise("peer_locked: the peer this write refines is locked and stays as it is")
		case e.noRetire:
			e.advise("detect_updates: the peer this write refines stays as it is")
		default:
			e.retire(c.of(v.target))
		}
	case VerdictConflict:
		if !proposed {
			row.Status = memrow.StatusConflicted
		}
		for _, peer := range v.conflicts {
			row.ConflictWith = appendOnce(row.ConflictWith, peer.MemoryID)
			if proposed {
				continue
			}
			if peer.Locked {
				e.advise("peer_locked: a conflicting peer is locked and is not marked")
				continue
			}
			if c.flaggedAlready(peer, row.MemoryID) {
				continue
			}
			mark := c.of(peer)
			mark.Status = memrow.StatusConflicted
			mark.ConflictWith = appendOnce(mark.ConflictWith, row.MemoryID)
		}
	}
}

// markSameKey judges the key's live established heads in other sessions of the same
// subject: newest_wins retires them (a locked one stays); under the other policies
// they stay and the row is marked for later judgement, except the anonymous user's:
// its sessions are separate tasks, where a judgement could only clear a flag
// (memory-architecture.md, "Same key, another session"). A head the namespace's
// conflict allowlist pairs with the entry's row is left alone (memory.set step 10).
func (e *entry) markSameKey(c *copies, policy string, now time.Time) {
	if e.restatement || policy == PolicyAppendOnly || e.row.Status == memrow.StatusProposed {
		return
	}
	for _, o := range sameKeyHeads(e.keyHeads, e.w.id, now) {
		switch {
		case e.listed != nil && e.listed.allowlisted(e.row.MemoryID, o.MemoryID):
			// listed: neither retired nor owed a judgement
		case policy == PolicyNewestWins && !o.Locked && !e.noRetire:
			e.retire(c.of(o))
		case !anonymous(e.w.id.UserID):
			e.row.JudgementOwed = true
		}
	}
}

// retire supersedes a head's copy by the entry's row.
func (e *entry) retire(copy *memrow.Row) {
	copy.Status, copy.SupersededBy = memrow.StatusSuperseded, e.row.MemoryID
	e.superseded = append(e.superseded, copy.MemoryID)
}

// copies are the copies of other heads one commit writes, one per head, in the order
// the verdicts first changed them.
type copies struct {
	op    string
	actor string // the request's principal
	// skipFlagged: a peer already conflicted against the row is not copied
	// (writeJudgedRows).
	skipFlagged bool
	inBatch     map[*memrow.Row]bool
	byKey       map[string]*pending
	order       []string
}

// of is the row to change for head h: h itself when the batch writes it, else its copy.
func (c *copies) of(h *memrow.Row) *memrow.Row {
	if c.inBatch[h] {
		return h
	}
	k := heads.IdentityKey(h.Identity)
	if p, ok := c.byKey[k]; ok {
		return p.row
	}
	p := &pending{op: c.op, event: events.TypeStatusChanged, row: copyOf(h), readVersion: h.Version, readSeq: h.Seq}
	if c.actor != "" {
		p.row.Actor = c.actor
	}
	c.byKey[k] = p
	c.order = append(c.order, k)
	return p.row
}

// flaggedAlready reports whether head h is already marked conflicted against the
// memory id and no verdict of this commit changes it otherwise: its copy would be a
// new version that changes nothing (a key written again against the same peers), so
// none is written. The pair is listed on both sides as before. Only where the
// commit's gap check covers the peer (skipFlagged): a bulk write's gap check rules
// out a peer revised out of reach, which the copy's head lock would have caught.
func (c *copies) flaggedAlready(h *memrow.Row, id string) bool {
	if !c.skipFlagged || c.inBatch[h] {
		return false
	}
	if _, copied := c.byKey[heads.IdentityKey(h.Identity)]; copied {
		return false
	}
	return h.Status == memrow.StatusConflicted && slices.Contains(h.ConflictWith, id)
}

// copyOf is a new version of a head with its content unchanged: a copy writer's row.
// A copy keeps the head's text, so it has no search document of its own to add; its
// status change reaches the search documents through the projection of its revision.
func copyOf(h *memrow.Row) *memrow.Row {
	c := *h
	c.Tags = slices.Clone(h.Tags) // an empty list stays a list: a head's tags are never null
	c.ConflictWith = append([]string(nil), h.ConflictWith...)
	c.Entities = slices.Clone(h.Entities)
	c.EntityTypes = maps.Clone(h.EntityTypes)
	c.Relations = slices.Clone(h.Relations)
	return &c
}

func appendOnce(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// sameKeyHeads are the live established heads of the key in other sessions of the
// same subject: the same user, or for the anonymous user the same agent.
func sameKeyHeads(keyHeads []*memrow.Row, id memrow.Identity, now time.Time) []*memrow.Row {
	var out []*memrow.Row
	for _, h := range keyHeads {
		if h.Identity == id || h.UserID != id.UserID || h.SessionID == id.SessionID || !h.Established(now) {
			continue
		}
		if anonymous(id.UserID) && h.Agent != id.Agent {
			continue
		}
		out = append(out, h)
	}
	return out
}
