package graph

import (
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/memrow"
)

// OpExpire is the op of the revision the expiry sweep writes: a row whose time ran out
// ends its facts, where a delete leaves them.
const OpExpire = "memory.expire"

// Statement is a row's statement of a fact, with the interval its writer gave. Its
// predicate is the relation it names, its tense folded (memrow.Relation); Past says
// its own verb was a past form of a state ("lived_in").
type Statement struct {
	Fact
	Cardinality string
	From, To    *time.Time
	Past        bool
}

// Entity is an entity named on a row: its canonical name, the spelling used and the
// type declared for it.
type Entity struct{ Name, Alias, Type string }

// Record is what the graph reads of one revision.
type Record struct {
	Seq uint64
	At  time.Time // the commit, to the microsecond
	Row RowRef
	// HoldsFacts: the row's statements are facts of the graph; HoldsEdges: the
	// entities on it co-occur. A row that holds neither drops what it held.
	HoldsFacts, HoldsEdges bool
	// Closes: a fact or edge the row drops closes when no other row holds it. A
	// delete closes nothing (a revision, a retirement or an expiry says a fact ended).
	Closes bool
	// Restore: an Undo, whose facts are seen again from its instant on.
	Restore    bool
	Statements []Statement
	Entities   []Entity
}

// RecordOf reads a revision for the graph. A row holds facts while it is live (not
// deleted, not expired, its valid_to not passed at the commit), not retired, not a
// proposal and not high. A row that is live and not retired holds the edges of the
// entities on it: a proposal's too, and a high row's, of the entities its writer
// declared, never of its relations (its content stays out of the shared graph).
func RecordOf(env *events.Envelope, c *events.Content) Record {
	rev := env.Revision
	at := env.CommittedAt.UTC()
	r := Record{Seq: uint64(env.Seq), At: at, Closes: !rev.Tombstone || rev.Op == OpExpire, Restore: env.Type == events.TypeRestored,
		Row: RowRef{MemoryID: rev.MemoryID, Agent: rev.Agent, UserID: rev.UserID, SessionID: rev.SessionID,
			MemoryKey: c.MemoryKey, ContentSHA256: rev.ContentSHA256, MemoryType: rev.MemoryType}}
	live := !rev.Tombstone && !passed(rev.ExpiresAt, at) && !passed(rev.ValidTo, at)
	status := memrow.Status(rev.Status)
	high := memrow.Sensitivity(rev.Sensitivity) == memrow.SensitivityHigh
	r.HoldsEdges = live && status != memrow.StatusSuperseded
	r.HoldsFacts = r.HoldsEdges && !high && status != memrow.StatusProposed
	seen := map[string]bool{}
	add := func(name, typ string) {
		canon := memrow.EntityName(name)
		if canon == "" || seen[canon] {
			return
		}
		seen[canon] = true
		r.Entities = append(r.Entities, Entity{Name: canon, Alias: name, Type: typ})
	}
	for _, e := range c.Entities {
		add(e, c.EntityTypes[e])
	}
	if high {
		return r
	}
	stated := map[Fact]bool{}
	for _, rel := range c.Relations {
		predicate, past := memrow.Relation(memrow.Predicate(rel.Predicate))
		f := Fact{memrow.EntityName(rel.Subject), predicate, memrow.EntityName(rel.Object)}
		if f.Subject == "" || f.Predicate == "" || f.Object == "" || stated[f] {
			continue
		}
		stated[f] = true
		add(rel.Subject, "")
		add(rel.Object, "")
		// A relation without dates of its own holds while its row says it does.
		from, to := seconds(rel.ValidFrom), seconds(rel.ValidTo)
		if from == nil {
			from = seconds(rev.ValidAt)
		}
		if to == nil {
			to = seconds(rev.ValidTo)
		}
		if from != nil && to != nil && !to.After(*from) {
			to = nil // the row's end before the relation's own start says nothing of it
		}
		card := rel.Cardinality
		if card != events.CardinalitySingle {
			card = events.CardinalityMulti
		}
		r.Statements = append(r.Statements, Statement{Fact: f, Cardinality: card, From: from, To: to, Past: past})
	}
	return r
}

// passed reports whether an optional deadline is at or before at.
func passed(t *time.Time, at time.Time) bool { return t != nil && !at.Before(*t) }

// seconds is a stated time at the precision the graph stores.
func seconds(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	s := t.UTC().Truncate(time.Second)
	return &s
}
