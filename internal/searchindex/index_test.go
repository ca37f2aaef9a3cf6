package searchindex

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/text"
)

var ns = Space{Org: "acme", Namespace: "notes"}

var now = time.Unix(1_800_000_000, 0)

func served() Filter { return Filter{Statuses: []string{"active", "conflicted"}, Now: now} }

func search(t *testing.T, x *Index, f Filter, q string) Legs {
	t.Helper()
	legs, _, err := x.Search(ns, Query{Filter: f, Vector: queryVector(q), Text: q, Terms: terms(q), Limit: 50, K1: 1.2, B: 0.75})
	if err != nil {
		t.Fatal(err)
	}
	return legs
}

func terms(q string) []string {
	var out []string
	for _, t := range text.Terms(q) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func keysOf(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.MemoryKey)
	}
	return out
}

func rev(seq int64, key, value string, version int64) *Revision {
	return &Revision{Seq: seq, MemoryID: fmt.Sprintf("00000000-0000-0000-0000-%012d", len(key)), Version: version, Agent: "-", UserID: "-",
		SessionID: "-", MemoryType: "fact", Status: "active", Sensitivity: "normal", ContentSHA256: shaOf(value),
		UpdatedAt: now, EmbeddingDim: 384, MemoryKey: key, Text: value, Vector: queryVector(value)}
}

func apply(x *Index, recs ...Record) Applied { return x.Apply(ns, recs) }

func revRec(r *Revision) Record { return Record{Seq: r.Seq, Revision: r} }

// A revision replaces its key's document; a redelivered or older one changes nothing.
func TestApplyKeepsTheNewestVersionOfEachKey(t *testing.T) {
	x := New(Config{})
	v1 := rev(1, "home-city", "the user lives in lisbon", 10)
	v2 := rev(2, "home-city", "the user lives in berlin", 20)
	apply(x, revRec(v1), revRec(v2))
	a := apply(x, revRec(v1), revRec(v2))
	if a.Duplicates != 2 || a.Position != 2 {
		t.Fatalf("replay: %+v", a)
	}
	// An older version arriving past the position (a record past a gap) is not applied either.
	old := *v1
	old.Seq = 5
	apply(x, revRec(&old))
	for _, q := range []string{"lives in lisbon", "lives in berlin"} {
		legs := search(t, x, served(), q)
		if len(legs.Vector) != 1 || legs.Vector[0].ContentSHA256 != v2.ContentSHA256 {
			t.Fatalf("%q: vector leg %+v, want only the berlin version", q, legs.Vector)
		}
	}
	if got := search(t, x, served(), "lisbon").Lexical; len(got) != 0 {
		t.Fatalf("the old value's terms still match: %+v", got)
	}
	if st := x.Stats(); st.Entries != 1 || st.Vectors != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Deleted rows, high-sensitivity rows and non-searchable types hold nothing a leg finds.
func TestRowsSearchMustNotServeHoldNoContent(t *testing.T) {
	for name, change := range map[string]func(*Revision){
		"tombstone":      func(r *Revision) { r.Tombstone = true },
		"high":           func(r *Revision) { r.Sensitivity = "high" },
		"episodic":       func(r *Revision) { r.MemoryType = "episodic" },
		"profile":        func(r *Revision) { r.MemoryType = "profile" },
		"tombstone copy": func(r *Revision) { r.Tombstone, r.Vector = true, nil },
	} {
		t.Run(name, func(t *testing.T) {
			x := New(Config{})
			apply(x, revRec(rev(1, "editor-theme", "the user prefers dark mode", 10)))
			r := rev(2, "editor-theme", "the user prefers dark mode", 20)
			change(r)
			apply(x, revRec(r))
			legs := search(t, x, Filter{Statuses: []string{"active"}, Now: now}, "editor-theme dark mode")
			if n := len(legs.Vector) + len(legs.Lexical) + len(legs.Key) + len(legs.Chunk); n != 0 {
				t.Fatalf("%d hits: %+v", n, legs)
			}
			back := rev(3, "editor-theme", "the user prefers dark mode", 30)
			apply(x, revRec(back))
			if legs := search(t, x, served(), "dark mode"); len(legs.Vector) != 1 || len(legs.Lexical) != 1 {
				t.Fatalf("a later searchable revision is not served: %+v", legs)
			}
		})
	}
}

// A copy (pin, status mark) declares its content's vector without carrying it: the index
// keeps the vector of the same content; a new value without one gets none.
func TestCopiesKeepTheirContentsVector(t *testing.T) {
	x := New(Config{})
	apply(x, revRec(rev(1, "k", "the invoice for march is due on friday", 10)))
	pin := rev(2, "k", "the invoice for march is due on friday", 20)
	pin.Vector, pin.Pinned, pin.Status = nil, true, "conflicted"
	apply(x, revRec(pin))
	legs := search(t, x, served(), "invoice for march")
	if len(legs.Vector) != 1 || legs.Vector[0].Score < 0.5 {
		t.Fatalf("the copy lost its vector: %+v", legs.Vector)
	}
	if got := search(t, x, Filter{Statuses: []string{"active"}, Now: now}, "invoice for march"); len(got.Vector)+len(got.Lexical) != 0 {
		t.Fatalf("the copy's status is not the one filtered on: %+v", got)
	}
	changed := rev(3, "k", "the invoice for april is due on monday", 30)
	changed.Vector = nil
	apply(x, revRec(changed))
	if legs := search(t, x, served(), "invoice for march"); len(legs.Vector) != 0 || len(legs.Lexical) != 1 {
		t.Fatalf("a new value without a vector: vector %+v, lexical %+v", legs.Vector, legs.Lexical)
	}
}

// A copy (a conflict mark: same text, new version and status) is found by the same
// terms at its new state and keeps its postings rather than writing them again; a copy
// whose tags changed is found by its new tags and no longer by the old ones.
func TestACopyKeepsItsTermsAndIsFoundAtItsNewState(t *testing.T) {
	x := New(Config{})
	v1 := rev(1, "k", "the invoice for march is due on friday", 10)
	v1.Tags = []string{"billing"}
	apply(x, revRec(v1))
	s := x.spaces[ns]
	slot, _ := s.find("-", "-", "-", "k")
	gen, live := s.cards[slot].gen, s.live
	mark := rev(2, "k", "the invoice for march is due on friday", 20)
	mark.Tags, mark.Vector, mark.Status = []string{"billing"}, nil, "conflicted"
	apply(x, revRec(mark))
	if s.cards[slot].gen != gen || s.live != live || s.stale != 0 {
		t.Fatalf("the copy wrote its postings again: generation %d (was %d), live %d (was %d), stale %d",
			s.cards[slot].gen, gen, s.live, live, s.stale)
	}
	conflicted := Filter{Statuses: []string{"conflicted"}, Now: now}
	for _, q := range []string{"invoice march", "friday"} {
		if got := search(t, x, conflicted, q).Lexical; len(got) != 1 || got[0].MemoryKey != "k" {
			t.Fatalf("%q: the copy is not found by its terms: %+v", q, got)
		}
		if got := search(t, x, Filter{Statuses: []string{"active"}, Now: now}, q); len(got.Lexical)+len(got.Vector) != 0 {
			t.Fatalf("%q: found at its old status: %+v", q, got)
		}
	}
	if got := search(t, x, conflicted, "april").Lexical; len(got) != 0 {
		t.Fatalf("found by a term it does not hold: %+v", got)
	}
	retagged := rev(3, "k", "the invoice for march is due on friday", 30)
	retagged.Tags, retagged.Vector, retagged.Status = []string{"finance"}, nil, "conflicted"
	apply(x, revRec(retagged))
	for tag, want := range map[string]int{"finance": 1, "billing": 0} {
		f := conflicted
		f.Tags = []string{tag}
		if got := search(t, x, f, "invoice march").Lexical; len(got) != want {
			t.Fatalf("tag %q: %d hits, want %d", tag, len(got), want)
		}
	}
}

// The chunk leg reads only windows of the content the document holds.
func TestChunkLegIsBoundToTheContent(t *testing.T) {
	x := New(Config{})
	long := ""
	for i := 0; len(long) < 2000; i++ {
		long += fmt.Sprintf("paragraph %d talks about the migration of the billing database to the new cluster. ", i)
	}
	long += "the final paragraph names the rollback plan for the payment gateway"
	windows := text.Chunks(long)
	r := rev(1, "runbook", long, 10)
	r.ChunkVectors = make([][]float32, len(windows))
	for i, w := range windows {
		r.ChunkVectors[i] = queryVector(w)
	}
	apply(x, revRec(r))
	legs := search(t, x, served(), "the rollback plan for the payment gateway")
	if len(legs.Chunk) != 1 || legs.Chunk[0].Score <= legs.Vector[0].Score {
		t.Fatalf("chunk %+v vector %+v: the window naming the plan must beat the whole value", legs.Chunk, legs.Vector)
	}
	cp := rev(2, "runbook", long, 20)
	cp.Vector, cp.Status = nil, "conflicted"
	apply(x, revRec(cp))
	if legs := search(t, x, served(), "the rollback plan for the payment gateway"); len(legs.Chunk) != 1 {
		t.Fatalf("a copy lost its windows: %+v", legs.Chunk)
	}
	apply(x, revRec(rev(3, "runbook", "short now", 30)))
	if legs := search(t, x, served(), "the rollback plan for the payment gateway"); len(legs.Chunk) != 0 {
		t.Fatalf("windows of the old content are still served: %+v", legs.Chunk)
	}
}

func userRev(seq int64, user, key, value string) *Revision {
	r := rev(seq, key, value, seq*10)
	r.UserID = user
	r.MemoryID = fmt.Sprintf("00000000-0000-0000-0000-%012d", seq)
	return r
}

// An erasure forgets its scope below its seq, and a redelivered revision of the scope
// does not bring it back; rows written after it stay.
func TestErasureFencesForgetTheScope(t *testing.T) {
	x := New(Config{})
	a1 := userRev(1, "ann", "a1", "ann likes green tea")
	b1 := userRev(2, "ben", "b1", "ben likes green tea")
	apply(x, revRec(a1), revRec(b1))
	apply(x, Record{Seq: 3, Erasure: &Fence{UserID: "ann", Seq: 3}})
	a2 := userRev(4, "ann", "a2", "ann now likes green coffee")
	apply(x, revRec(a2))
	apply(x, revRec(a1)) // a redelivery of an erased revision
	got := keysOf(search(t, x, served(), "likes green tea").Lexical)
	slices.Sort(got)
	if fmt.Sprint(got) != "[a2 b1]" {
		t.Fatalf("after ann's erasure: %v, want [a2 b1]", got)
	}
	apply(x, Record{Seq: 5, Erasure: &Fence{Seq: 5}})
	if got := search(t, x, served(), "likes green tea"); len(got.Lexical)+len(got.Vector) != 0 {
		t.Fatalf("after the namespace's erasure: %+v", got)
	}
	if st := x.Stats(); st.Entries != 0 {
		t.Fatalf("the erasure left %d entries", st.Entries)
	}
}

// A redacted version, and a revision whose data key is gone, retire the content held.
func TestRedactionAndSealedRevisionsRetireContent(t *testing.T) {
	x := New(Config{})
	r := userRev(1, "-", "k", "the door code is 4321")
	apply(x, revRec(r))
	apply(x, Record{Seq: 2, Redaction: &Redaction{MemoryID: r.MemoryID, Versions: []int64{r.Version}}})
	if got := search(t, x, served(), "door code 4321"); len(got.Lexical)+len(got.Vector)+len(got.Key) != 0 {
		t.Fatalf("a redacted version is served: %+v", got)
	}
	s := userRev(3, "-", "j", "the safe code is 9876")
	apply(x, revRec(s))
	sealed := &Revision{Seq: 4, MemoryID: s.MemoryID, Version: s.Version + 1, Agent: "-", UserID: "-", SessionID: "-",
		MemoryType: "fact", Status: "active", ContentSHA256: s.ContentSHA256, Sealed: true}
	apply(x, revRec(sealed))
	if got := search(t, x, served(), "safe code 9876"); len(got.Lexical)+len(got.Vector) != 0 {
		t.Fatalf("content behind a destroyed key is served: %+v", got)
	}
	// The older revision replayed does not come back over the sealed one.
	again := *s
	again.Seq = 6
	apply(x, revRec(&again))
	if got := search(t, x, served(), "safe code 9876"); len(got.Lexical) != 0 {
		t.Fatalf("a replayed older revision came back: %+v", got.Lexical)
	}
}

// The position moves only over contiguous seqs, or over an erasure's; WaitFor returns
// when it reaches the seq asked for.
func TestPositionIsGaplessAndWaitable(t *testing.T) {
	x := New(Config{})
	if a := apply(x, revRec(rev(1, "a", "one", 1)), revRec(rev(2, "b", "two", 2)), revRec(rev(4, "d", "four", 4))); a.Position != 2 || !a.Gap {
		t.Fatalf("%+v, want position 2 with a gap", a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := x.WaitFor(ctx, ns, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting past a gap: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- x.WaitFor(context.Background(), ns, 3) }()
	apply(x, revRec(rev(3, "c", "three", 3)))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// seq 4 arrived past the gap before: the relay publishes it again after 3.
	if p := x.Position(ns); p != 3 {
		t.Fatalf("position %d, want 3", p)
	}
	apply(x, revRec(rev(4, "d", "four", 4)))
	// seqs 5 and 6 were withdrawn by the erasure at 7, which jumps over them.
	if a := apply(x, Record{Seq: 7, Erasure: &Fence{UserID: "x", Seq: 7}}); a.Position != 7 {
		t.Fatalf("after the erasure's jump: %+v", a)
	}
	if err := x.WaitFor(context.Background(), Space{"acme", "never-written"}, 0); err != nil {
		t.Fatal(err)
	}
}

// Every filter of the ClickHouse legs narrows the legs here.
func TestFiltersNarrowEveryLeg(t *testing.T) {
	x := New(Config{})
	mk := func(seq int64, key string, edit func(*Revision)) {
		r := rev(seq, key, "the team offsite is in lisbon", seq)
		r.MemoryID = fmt.Sprintf("00000000-0000-0000-0000-%012d", seq)
		edit(r)
		apply(x, revRec(r))
	}
	past, future := now.Add(-time.Hour), now.Add(time.Hour)
	mk(1, "plain", func(r *Revision) { r.Tags = []string{"travel", "team"} })
	mk(2, "agent", func(r *Revision) { r.Agent = "planner" })
	mk(3, "user", func(r *Revision) { r.UserID = "ann" })
	mk(4, "session", func(r *Revision) { r.SessionID = "s1" })
	mk(5, "decision", func(r *Revision) { r.MemoryType = "decision"; r.Tags = []string{"travel"} })
	mk(6, "superseded", func(r *Revision) { r.Status = "superseded" })
	mk(7, "expired", func(r *Revision) { r.ExpiresAt = &past })
	mk(8, "expiring", func(r *Revision) { r.ExpiresAt = &future })
	mk(9, "invalid", func(r *Revision) { r.ValidTo = &past })
	mk(10, "shared", func(r *Revision) { r.UserID = "_shared" })
	for _, c := range []struct {
		name string
		f    func(*Filter)
		want string
	}{
		{"served", func(*Filter) {}, "[agent decision expiring plain session shared user]"},
		{"user or the shared rows", func(f *Filter) { f.UserID, f.OrUserID = "ann", "_shared" }, "[shared user]"},
		{"a user with no rows, or the shared rows", func(f *Filter) { f.UserID, f.OrUserID = "zed", "_shared" }, "[shared]"},
		{"a user, and no shared rows", func(f *Filter) { f.UserID, f.OrUserID = "ann", "_nobody" }, "[user]"},
		{"neither", func(f *Filter) { f.UserID, f.OrUserID = "zed", "_nobody" }, "[]"},
		{"session or the shared rows", func(f *Filter) { f.SessionID, f.OrUserID = "s1", "_shared" }, "[session shared]"},
		{"a session with no rows, or the shared rows", func(f *Filter) { f.SessionID, f.OrUserID = "s9", "_shared" }, "[shared]"},
		{"a session with no rows, and no shared rows", func(f *Filter) { f.SessionID, f.OrUserID = "s9", "_nobody" }, "[]"},
		{"agent", func(f *Filter) { f.Agent = "planner" }, "[agent]"},
		{"user", func(f *Filter) { f.UserID = "ann" }, "[user]"},
		{"unknown user", func(f *Filter) { f.UserID = "\x00none" }, "[]"},
		{"session", func(f *Filter) { f.SessionID = "s1" }, "[session]"},
		{"type", func(f *Filter) { f.MemoryType = "decision" }, "[decision]"},
		{"tags all", func(f *Filter) { f.Tags = []string{"travel", "team"} }, "[plain]"},
		{"tags any", func(f *Filter) { f.Tags, f.TagsAny = []string{"team", "nope"}, true }, "[plain]"},
		{"tags all unknown", func(f *Filter) { f.Tags = []string{"travel", "nope"} }, "[]"},
		{"statuses", func(f *Filter) { f.Statuses = []string{"superseded"} }, "[superseded]"},
		{"later", func(f *Filter) { f.Now = now.Add(2 * time.Hour) }, "[agent decision plain session shared user]"},
		{"valid at", func(f *Filter) { f.ValidAt = past.Add(-time.Minute) }, "[agent decision expiring invalid plain session shared user]"},
	} {
		f := served()
		c.f(&f)
		legs := search(t, x, f, "team offsite lisbon")
		for leg, hits := range map[string][]Hit{"vector": legs.Vector, "lexical": legs.Lexical} {
			got := keysOf(hits)
			slices.Sort(got)
			if fmt.Sprint(got) != c.want && !(c.want == "[]" && got == nil) {
				t.Errorf("%s, %s leg: %v, want %v", c.name, leg, got, c.want)
			}
		}
	}
}

// BM25 over the filtered documents, and the idf-weighted coverage, as the lexical leg
// computes them in ClickHouse.
func TestLexicalLegScoresBM25OverTheFilteredDocuments(t *testing.T) {
	x := New(Config{})
	docs := map[string]string{
		"a": "alice booked a hotel near the station in lisbon",
		"b": "bob booked a rental car in lisbon lisbon",
		"c": "carol reviewed the budget spreadsheet",
		"d": "alice booked the team offsite",
	}
	var seq int64
	for _, k := range []string{"a", "b", "c", "d"} {
		seq++
		r := userRev(seq, "-", k, docs[k])
		if k == "d" {
			r.UserID = "other"
		}
		apply(x, revRec(r))
	}
	f := served()
	f.UserID = "-" // d is filtered out, and out of the statistics
	q := []string{"alice", "book", "lisbon"}
	legs, _, _ := x.Search(ns, Query{Filter: f, Terms: q, Limit: 10, K1: 1.2, B: 0.75})
	// Reference: the formula over a, b and c.
	filtered := []string{"a", "b", "c"}
	n, sum := 0.0, 0.0
	tf := map[string]map[string]float64{}
	for _, k := range filtered {
		tf[k] = map[string]float64{}
		for _, w := range text.Terms(docs[k]) {
			tf[k][w]++
			sum++
		}
		n++
	}
	avgdl := sum / n
	idf := map[string]float64{}
	total := 0.0
	for _, w := range q {
		df := 0.0
		for _, k := range filtered {
			if tf[k][w] > 0 {
				df++
			}
		}
		idf[w] = math.Log(1 + (n-df+0.5)/(df+0.5))
		total += idf[w]
	}
	want := map[string][2]float64{}
	for _, k := range filtered {
		dl := float64(len(text.Terms(docs[k])))
		var score, cov float64
		for _, w := range q {
			if f := tf[k][w]; f > 0 {
				score += idf[w] * f * 2.2 / (f + 1.2*(1-0.75+0.75*dl/avgdl))
				cov += idf[w] / total
			}
		}
		if score > 0 {
			want[k] = [2]float64{score, cov}
		}
	}
	if len(legs.Lexical) != len(want) {
		t.Fatalf("hits %+v, want %v", legs.Lexical, want)
	}
	for i, h := range legs.Lexical {
		w := want[h.MemoryKey]
		if math.Abs(h.Score-w[0]) > 1e-9 || math.Abs(h.Coverage-w[1]) > 1e-9 {
			t.Fatalf("%s: score %v coverage %v, want %v", h.MemoryKey, h.Score, h.Coverage, w)
		}
		if i > 0 && h.Score > legs.Lexical[i-1].Score {
			t.Fatal("hits are not ranked")
		}
	}
}

// The key leg: 1 for the key verbatim, else the share of the key's terms the query holds.
func TestKeyLegScoresTheKeysWords(t *testing.T) {
	x := New(Config{})
	apply(x, revRec(userRev(1, "-", "office.rotterdam.address", "blaak 31")),
		revRec(userRev(2, "-", "editor-theme", "dark")), revRec(userRev(3, "-", "rotterdam", "a city")))
	legs, _, _ := x.Search(ns, Query{Filter: served(), Text: " editor-theme ", Terms: terms("editor-theme"), Limit: 10})
	if len(legs.Key) != 1 || legs.Key[0].MemoryKey != "editor-theme" || legs.Key[0].Score != 1 {
		t.Fatalf("verbatim: %+v", legs.Key)
	}
	legs, _, _ = x.Search(ns, Query{Filter: served(), Text: "where is the rotterdam office", Terms: terms("where is the rotterdam office"), Limit: 10})
	got := map[string]float64{}
	for _, h := range legs.Key {
		got[h.MemoryKey] = h.Score
	}
	if len(got) != 2 || got["rotterdam"] != 1 || math.Abs(got["office.rotterdam.address"]-2.0/3) > 1e-12 {
		t.Fatalf("by words: %v", got)
	}
}

// The peer read: the type's served rows under other keys, in the read scope unless pinned.
func TestPeersFollowThePeerRule(t *testing.T) {
	x := New(Config{})
	add := func(seq int64, user, key, value string, edit func(*Revision)) {
		r := userRev(seq, user, key, value)
		if edit != nil {
			edit(r)
		}
		apply(x, revRec(r))
	}
	add(1, "ann", "own", "ann prefers a window seat", nil)
	add(2, "ann", "mine", "ann prefers a window seat on flights", nil)
	add(3, "ben", "bens", "ann prefers a window seat please", nil)
	add(4, "ben", "pinned", "ann prefers a window seat always", func(r *Revision) { r.Pinned = true })
	add(5, "ann", "pref", "ann prefers a window seat sometimes", func(r *Revision) { r.MemoryType = "preference" })
	add(6, "ann", "old", "ann prefers a window seat maybe", func(r *Revision) { r.Status = "superseded" })
	q := PeerQuery{MemoryType: "fact", MemoryKey: "own", Vector: queryVector("ann prefers a window seat"), Limit: 16, Now: now}
	peers, pos, err := x.Peers(ns, q)
	if err != nil || pos != 6 {
		t.Fatalf("peers: %v at %d", err, pos)
	}
	if got := peerKeys(peers); got != "[bens mine pinned]" {
		t.Fatalf("peers %v", got)
	}
	q.ReadUserID = "ann"
	peers, _, _ = x.Peers(ns, q)
	if got := peerKeys(peers); got != "[mine pinned]" {
		t.Fatalf("peers of a token bound to ann: %v", got)
	}
	for i := 1; i < len(peers); i++ {
		if peers[i].Cosine > peers[i-1].Cosine {
			t.Fatal("peers are not nearest first")
		}
	}
	q.Limit = 1
	if peers, _, _ = x.Peers(ns, q); len(peers) != 1 {
		t.Fatalf("limit 1: %d peers", len(peers))
	}
}

func peerKeys(ps []Peer) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.MemoryKey)
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

// Past the budget the coldest namespaces are dropped: their reads say "not held" (read
// ClickHouse) while their positions keep following the stream.
func TestBudgetEvictsTheColdestNamespaces(t *testing.T) {
	x := New(Config{})
	revs := corpus(300, 1)
	spaces := []Space{{"acme", "a"}, {"acme", "b"}, {"acme", "c"}}
	for _, sp := range spaces {
		x.Apply(sp, records(revs[:100]))
	}
	// b and c are searched, c last: a is the coldest, then b.
	x.Search(spaces[1], Query{Filter: served(), Terms: text.Terms("alice"), Limit: 5})
	time.Sleep(time.Millisecond)
	x.Search(spaces[2], Query{Filter: served(), Terms: text.Terms("alice"), Limit: 5})
	st := x.Stats()
	per := st.Bytes / 3
	if got := x.Enforce(st.Bytes + 1); got != nil {
		t.Fatalf("within the budget, evicted %v", got)
	}
	evicted := x.Enforce(st.Bytes - per/2)
	if fmt.Sprint(evicted) != "[acme/a]" {
		t.Fatalf("evicted %v, want the coldest namespace only", evicted)
	}
	if _, _, err := x.Search(spaces[0], Query{Filter: served(), Limit: 5}); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("search of an evicted namespace: %v", err)
	}
	if _, _, err := x.Peers(spaces[0], PeerQuery{Vector: revs[0].Vector, Limit: 5}); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("peers of an evicted namespace: %v", err)
	}
	if legs, _, err := x.Search(spaces[1], Query{Filter: served(), Terms: text.Terms("alice"), Limit: 5}); err != nil || len(legs.Lexical) == 0 {
		t.Fatalf("a held namespace: %v %+v", err, legs)
	}
	if a := x.Apply(spaces[0], records(revs[100:120])); a.Position != 120 {
		t.Fatalf("an evicted namespace's position: %+v", a)
	}
	after := x.Stats()
	if after.Held != 2 || after.Bytes > st.Bytes-per/2 {
		t.Fatalf("after eviction: %d held, %d bytes (budget %d)", after.Held, after.Bytes, st.Bytes-per/2)
	}
}
