package searchindex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/text"
)

// churned builds an index the way a long-lived follower does: memories written,
// revised, copied, deleted, made sensitive, redacted, sealed and erased, over several
// namespaces and users, some with chunk windows; one namespace evicted.
func churned(t *testing.T) (*Index, []Space) {
	t.Helper()
	x := New(Config{GraphMin: 1 << 30})
	spaces := []Space{ns, {Org: "acme", Namespace: "ops"}, {Org: "globex", Namespace: "notes"}, {Org: "acme", Namespace: "cold"}}
	revs := corpus(1200, 11)
	long := strings.Repeat("the migration of the billing database to the new cluster needs a rollback plan. ", 30)
	windows := text.Chunks(long)
	seq := map[Space]int64{}
	next := func(sp Space) int64 { seq[sp]++; return seq[sp] }
	for i, r := range revs {
		sp := spaces[i%len(spaces)]
		r.Seq = next(sp)
		if i%50 == 0 {
			r.Text, r.ContentSHA256 = long+fmt.Sprint(i), shaOf(long+fmt.Sprint(i))
			r.ChunkVectors = make([][]float32, len(windows))
			for j, w := range windows {
				r.ChunkVectors[j] = queryVector(w)
			}
		}
		x.Apply(sp, []Record{{Seq: r.Seq, Revision: r}})
	}
	rng := rand.New(rand.NewSource(3))
	for i, r := range revs[:400] {
		sp := spaces[i%len(spaces)]
		v := *r
		v.Seq, v.Version = next(sp), r.Version+10_000
		switch i % 8 {
		case 0: // revised
			v.Text = sentence(rng)
			v.ContentSHA256, v.Vector = shaOf(v.Text), queryVector(v.Text)
			v.ChunkVectors = nil
		case 1: // a copy: a status mark without a vector
			v.Status, v.Vector, v.ChunkVectors = "conflicted", nil, nil
		case 2:
			v.Tombstone = true
		case 3:
			v.Sensitivity = "high"
		case 4:
			v.Pinned = true
			exp := now.Add(time.Hour)
			v.ExpiresAt = &exp
		case 5:
			x.Apply(sp, []Record{{Seq: v.Seq, Redaction: &Redaction{MemoryID: r.MemoryID, Versions: []int64{r.Version}}}})
			continue
		case 6:
			v.Sealed = true
		default:
			continue
		}
		x.Apply(sp, []Record{{Seq: v.Seq, Revision: &v}})
	}
	x.Apply(ns, []Record{{Seq: next(ns), Erasure: &Fence{UserID: "u3", Seq: seq[ns]}, Jump: true}})
	x.Apply(ns, []Record{{Seq: next(ns) + 5}}) // past a gap: seen, the position stays
	x.Evict(spaces[3])
	x.Apply(spaces[3], []Record{{Seq: next(spaces[3])}})
	return x, spaces
}

func roundTrip(t *testing.T, x *Index) (*Index, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := x.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	y := New(Config{GraphMin: 1 << 30})
	if err := y.ReadCheckpoint(bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
		t.Fatal(err)
	}
	return y, buf.Bytes()
}

// sameAnswers compares every leg of a set of searches, and the peer read, over both
// indexes, and what their stats say of each namespace.
func sameAnswers(t *testing.T, want, got *Index, spaces []Space) {
	t.Helper()
	rng := rand.New(rand.NewSource(9))
	filters := []Filter{served(), {Statuses: []string{"active"}, Now: now, UserID: "u1"}, {Statuses: []string{"active", "conflicted"}, Now: now, Tags: []string{"lisbon"}},
		{Statuses: []string{"active", "conflicted", "superseded"}, Now: now.Add(2 * time.Hour)}}
	for _, sp := range spaces {
		for i := 0; i < 24; i++ {
			q := sentence(rng)
			if i%6 == 0 {
				q = "rollback plan for the billing database"
			}
			query := Query{Filter: filters[i%len(filters)], Vector: queryVector(q), Text: q, Terms: terms(q), Limit: 40, K1: 1.2, B: 0.75}
			a, pa, ea := want.Search(sp, query)
			b, pb, eb := got.Search(sp, query)
			if !errors.Is(eb, ea) || pa != pb || !reflect.DeepEqual(a, b) {
				t.Fatalf("%s %q: the loaded index answers\n%+v (%d, %v)\nthe live one\n%+v (%d, %v)", sp, q, b, pb, eb, a, pa, ea)
			}
			peer := PeerQuery{MemoryType: "fact", MemoryKey: "m.1.bob", Vector: queryVector(q), Limit: 10, Now: now}
			if i%2 == 1 {
				peer.ReadUserID = "u2"
			}
			pw, _, _ := want.Peers(sp, peer)
			pg, _, _ := got.Peers(sp, peer)
			if !reflect.DeepEqual(pw, pg) {
				t.Fatalf("%s: peers differ: loaded %+v, live %+v", sp, pg, pw)
			}
		}
	}
	sw, sg := want.Stats(), got.Stats()
	if len(sw.Spaces) != len(sg.Spaces) || sw.Entries != sg.Entries || sw.Vectors != sg.Vectors || sw.Held != sg.Held {
		t.Fatalf("stats: loaded %+v, live %+v", sg, sw)
	}
	for i := range sw.Spaces {
		a, b := sw.Spaces[i], sg.Spaces[i]
		if a.Space != b.Space || a.Held != b.Held || a.Entries != b.Entries || a.Vectors != b.Vectors || a.Position != b.Position || a.Last != b.Last {
			t.Fatalf("%s: loaded %+v, live %+v", a.Space, b, a)
		}
	}
}

// A loaded checkpoint answers every search and peer read as the index it was written
// from, and goes on applying the stream as that index does: versions, fences and
// positions came with it.
func TestCheckpointRoundTripAnswersAsTheLiveIndex(t *testing.T) {
	x, spaces := churned(t)
	y, _ := roundTrip(t, x)
	sameAnswers(t, x, y, spaces)

	more := corpus(300, 5) // the same revisions, memory ids included, for both
	for _, idx := range []*Index{x, y} {
		for i, orig := range more {
			r := *orig
			sp := spaces[i%3]
			r.Seq = idx.Position(sp) + 1
			r.MemoryKey = fmt.Sprintf("later.%d", i)
			if i%10 == 0 { // a late revision of an erased user, below the fence: not applied
				r.UserID, r.Seq = "u3", 2
			}
			idx.Apply(sp, []Record{{Seq: r.Seq, Revision: &r}})
		}
		idx.Apply(spaces[1], []Record{{Seq: idx.Position(spaces[1]) + 1, Erasure: &Fence{UserID: "u5", Seq: idx.Position(spaces[1]) + 1}, Jump: true}})
	}
	sameAnswers(t, x, y, spaces)
	// And a checkpoint of the loaded index loads to the same answers again.
	z, _ := roundTrip(t, y)
	sameAnswers(t, x, z, spaces)
}

// What an erasure or a redaction removed is not in a checkpoint written after it, though
// the live index still holds it as dead rows and stale postings until it compacts.
func TestCheckpointHoldsNothingErasedOrRedacted(t *testing.T) {
	x := New(Config{})
	secret := userRev(1, "ann", "ann.passport", "ann's passport number is zq7781x")
	redacted := userRev(2, "ben", "ben.door", "the door code is vk4402")
	kept := userRev(3, "cy", "cy.tea", "cy likes green tea")
	secret.Tags, kept.Tags = []string{"anntag"}, []string{"teatag"}
	apply(x, revRec(secret), revRec(redacted), revRec(kept))
	_, before := roundTrip(t, x)
	for _, s := range []string{"zq7781x", "vk4402", "anntag", "ann.passport"} {
		if !bytes.Contains(before, []byte(s)) {
			t.Fatalf("the checkpoint before the erasure does not hold %q: the test proves nothing", s)
		}
	}
	apply(x, Record{Seq: 4, Erasure: &Fence{UserID: "ann", Seq: 4}, Jump: true},
		Record{Seq: 5, Redaction: &Redaction{MemoryID: redacted.MemoryID, Versions: []int64{redacted.Version}}})
	y, after := roundTrip(t, x)
	for _, s := range []string{"zq7781x", "passport", "vk4402", "anntag", "ann.passport"} {
		if bytes.Contains(after, []byte(s)) {
			t.Fatalf("the checkpoint written after the erasure and the redaction still holds %q", s)
		}
	}
	if !bytes.Contains(after, []byte("green")) || !bytes.Contains(after, []byte("teatag")) {
		t.Fatal("the checkpoint lost what was not erased")
	}
	if got := keysOf(search(t, y, served(), "passport door code green tea").Lexical); fmt.Sprint(got) != "[cy.tea]" {
		t.Fatalf("the loaded index serves %v, want [cy.tea]", got)
	}
	// The fence came with it: a redelivery of ann's revision stays out.
	y.Apply(ns, []Record{revRec(secret)})
	got := search(t, y, served(), "ann's passport number is zq7781x")
	if k := append(keysOf(got.Vector), keysOf(got.Lexical)...); slices.Contains(k, "ann.passport") {
		t.Fatalf("an erased revision came back after the load: %v", k)
	}
}

// A damaged or foreign checkpoint is refused and leaves the index as it was.
func TestCheckpointRefusesDamagedFiles(t *testing.T) {
	x, _ := churned(t)
	_, good := roundTrip(t, x)
	cases := map[string][]byte{
		"truncated":       good[:len(good)/2],
		"empty":           nil,
		"other version":   append([]byte{checkpointVersion + 1}, good[1:]...),
		"a huge count":    append([]byte{checkpointVersion, 0xff, 0xff, 0xff, 0xff, 0x0f}, good[2:]...),
		"cut in the tail": good[:len(good)-3],
	}
	for name, b := range cases {
		y := New(Config{})
		err := y.ReadCheckpoint(bytes.NewReader(b), int64(len(b)))
		if err == nil {
			t.Fatalf("%s: loaded", name)
		}
		if name == "other version" && !errors.Is(err, ErrCheckpointVersion) {
			t.Fatalf("%s: %v, want ErrCheckpointVersion", name, err)
		}
		if st := y.Stats(); st.Namespaces != 0 || st.Entries != 0 {
			t.Fatalf("%s: a refused checkpoint left %+v", name, st)
		}
	}
}

// A search that waited on a namespace before the load is woken by it.
func TestCheckpointLoadWakesWaiters(t *testing.T) {
	x := New(Config{})
	apply(x, revRec(rev(1, "a", "one", 1)), revRec(rev(2, "b", "two", 2)))
	var buf bytes.Buffer
	if err := x.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	y := New(Config{})
	waited := make(chan error, 1)
	go func() { waited <- y.WaitFor(context.Background(), ns, 2) }()
	for y.Stats().Namespaces == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := y.ReadCheckpoint(&buf, int64(buf.Len())); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
}

// While an index is Warming no graph is built; Warm drops the dead rows and stale
// postings the warm-up left, builds the graphs due, and answers as before.
func TestWarmingDefersGraphBuildsAndWarmTidies(t *testing.T) {
	x := New(Config{GraphMin: 200})
	x.Warming()
	revs := corpus(1500, 4)
	for i := 0; i < len(revs); i += 100 {
		x.Apply(ns, records(revs[i:i+100]))
	}
	rng := rand.New(rand.NewSource(8))
	for i, r := range revs[:600] { // revised: their first rows and postings die
		v := *r
		v.Seq, v.Version = int64(len(revs)+i+1), r.Version+10_000
		v.Text = sentence(rng)
		v.ContentSHA256, v.Vector = shaOf(v.Text), queryVector(v.Text)
		x.Apply(ns, []Record{{Seq: v.Seq, Revision: &v}})
	}
	x.Settle()
	before := x.Stats()
	if before.Spaces[0].Graph != 0 {
		t.Fatalf("a graph was built while warming: %+v", before.Spaces[0])
	}
	reference, _ := roundTrip(t, x) // the same answers, from what is served only
	x.Warm()
	x.Settle()
	after := x.Stats()
	if after.Spaces[0].Graph != 1500 {
		t.Fatalf("Warm built no graph over the 1500 vectors: %+v", after.Spaces[0])
	}
	if graph := x.spaces[ns].arenas[384].graph.Bytes(); after.Bytes-graph >= before.Bytes {
		t.Fatalf("Warm kept what is not served: %d bytes before, %d after (graph included)", before.Bytes, after.Bytes)
	}
	sameAnswers(t, reference, x, []Space{ns})
}
