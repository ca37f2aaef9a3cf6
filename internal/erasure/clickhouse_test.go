package erasure

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/tableset"
)

// An erasure deletes the scope's rows below each fence; the audit trail keeps its rows
// and loses their keys, content hashes and user ids, unless the erasure purges.
func TestEraseMutation(t *testing.T) {
	fences := []Fence{{Org: "acme", Namespace: "support", UserID: "alice", Seq: 42}, {Org: "acme", Namespace: "sales", Seq: 7}}
	m := eraseMutation(tableset.Serving(), "memory", fences, false)
	// The user is bound as ClickHouse's cityHash64('alice'), so the command kept with
	// the mutation does not name them.
	if m.Set != "" || m.Where != "((org = ? AND namespace = ? AND cityHash64(user_id) = ? AND seq < ?) OR (org = ? AND namespace = ? AND seq < ?))" ||
		fmt.Sprint(m.Args) != "[acme support 12274877210530265870 42 acme sales 7]" {
		t.Fatalf("memory: %+v", m)
	}
	audit := eraseMutation(tableset.Serving(), "audit_log", fences, false)
	// A row of the chain's writer format loses its agent and session id too; one of
	// format 1 keeps them, as its hash covers them.
	if audit.Set != "memory_key = '', content_sha256 = '', user_id = '', subject_salt = '', "+
		"agent = if(chain_format >= 2, '', agent), session_id = if(chain_format >= 2, '', session_id)" ||
		!strings.HasSuffix(audit.Where, " AND (memory_key != '' OR content_sha256 != '' OR user_id != '' OR subject_salt != '' OR "+
			"(chain_format >= 2 AND (agent != '' OR session_id != '')))") {
		t.Fatalf("audit_log without a purge: %+v", audit)
	}
	if g := eraseMutation(tableset.Of(4), "audit_log", fences, false); g.Table != "audit_log__g4" || g.Set != audit.Set || g.Where != audit.Where {
		t.Fatalf("audit_log of generation 4: %+v", g)
	}
	if purged := eraseMutation(tableset.Serving(), "audit_log", fences, true); purged.Set != "" || strings.Contains(purged.Where, "memory_key") {
		t.Fatalf("audit_log with a purge: %+v", purged)
	}
}

func TestFenceOf(t *testing.T) {
	env := &events.Envelope{Type: events.TypeErased, Org: "acme", Namespace: "support", Seq: 9,
		Erasure: &events.Erasure{ID: "e", Scope: events.ErasureScopeUser, UserID: "alice", Purge: true, Generation: 9}}
	if f, ok := FenceOf(env); !ok || f != (Fence{Org: "acme", Namespace: "support", UserID: "alice", Seq: 9, Purge: true, ErasureID: "e"}) {
		t.Fatalf("FenceOf = %+v, %t", f, ok)
	}
	// Version 2 names the user by reference: the fence takes nothing until resolved.
	ref := strings.Repeat("ab", 32)
	env.Erasure = &events.Erasure{ID: "e", Scope: events.ErasureScopeUser, UserRef: ref, Generation: 9}
	f, ok := FenceOf(env)
	if !ok || !f.Unresolved() || f.UserRef != ref || len(resolved([]Fence{f})) != 0 {
		t.Fatalf("FenceOf = %+v, %t", f, ok)
	}
	env.Erasure = nil
	if _, ok := FenceOf(env); ok {
		t.Fatal("a record without its erasure has a fence")
	}
}

// Every ClickHouse table a projection writes is cleared by an erasure.
func TestErasureReachesEveryProjectionTable(t *testing.T) {
	got := strings.Join(chCounted(), " ")
	for _, table := range tableset.Projection() {
		if !strings.Contains(" "+got+" ", " "+table+" ") {
			t.Errorf("an erasure does not reach %s (it reaches %s)", table, got)
		}
	}
}

// A withdrawal's redaction (an erasure's, of a promoted copy) asks for the copy's rows
// below its record; a plain redaction for its versions' text alone.
func TestRedactionOfAWithdrawal(t *testing.T) {
	env := &events.Envelope{Type: events.TypeRedacted, Org: "acme", Namespace: "support", Seq: 12,
		Revision:  &events.Revision{MemoryID: "0b7e3f5a-4c7e-4a44-9a53-0e0f6d0a9d11"},
		Redaction: &events.Redaction{Versions: []int64{2, 3}, Withdrawal: &events.Withdrawal{Purge: true}}}
	r, ok := RedactionOf(env)
	if !ok || !r.Withdrawn || !r.Purge || r.Seq != 12 {
		t.Fatalf("RedactionOf = %+v, %t", r, ok)
	}
	if w, args := r.copyRows(); w != "(org = ? AND namespace = ? AND memory_id = toUUID(?) AND seq < ?)" ||
		fmt.Sprint(args) != "[acme support 0b7e3f5a-4c7e-4a44-9a53-0e0f6d0a9d11 12]" {
		t.Fatalf("the copy's rows: %s %v", w, args)
	}
	env.Redaction.Withdrawal = nil
	if r, _ := RedactionOf(env); r.Withdrawn || r.Purge {
		t.Fatalf("a plain redaction reads as a withdrawal: %+v", r)
	}
}
