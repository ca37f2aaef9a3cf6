package searchindex

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The lexical and key legs walk their lists together in slot order. Whatever a
// namespace went through (revisions of old documents, redactions, an erasure whose
// slots new documents take again, a compaction, a checkpoint), they answer exactly
// what scoring every posting term by term answers, and every list stays in slot order.
func TestLexicalAndKeyLegsAnswerAsAFullScore(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			x := New(Config{})
			h := newHistory(seed)
			h.grow(x, 300)
			checkLegs(t, x, h, "after the load")
			h.churn(x, 400)
			checkLegs(t, x, h, "after revisions, redactions and erasures")
			s := x.spaces[ns]
			s.mu.Lock()
			s.compactPostings()
			s.mu.Unlock()
			checkLegs(t, x, h, "after a compaction")
			h.churn(x, 200)
			var buf bytes.Buffer
			if err := x.WriteCheckpoint(&buf); err != nil {
				t.Fatal(err)
			}
			y := New(Config{})
			if err := y.ReadCheckpoint(bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
				t.Fatal(err)
			}
			checkLegs(t, x, h, "after more churn")
			checkLegs(t, y, h, "read from a checkpoint")
		})
	}
}

// history writes a namespace's revisions at random: new memories, revisions of any
// of them, redactions and users' erasures.
type history struct {
	rng  *rand.Rand
	seq  int64
	mems []*histMem
	keys []string
}

type histMem struct {
	id, key, user string
	version       int64
	gone          bool
	last          *Revision // the latest revision written
}

func newHistory(seed int64) *history { return &history{rng: rand.New(rand.NewSource(seed))} }

func (h *history) revision(m *histMem) Record {
	h.seq++
	m.version++
	text := sentence(h.rng)
	m.last = &Revision{Seq: h.seq, MemoryID: m.id, Version: m.version, Agent: "-", UserID: m.user,
		SessionID: "-", MemoryType: "fact", Status: "active", Sensitivity: "normal", ContentSHA256: shaOf(text),
		UpdatedAt: time.Unix(1_700_000_000, 0).UTC(), EmbeddingDim: 384, MemoryKey: m.key, Text: text,
		Tags: []string{places[h.rng.Intn(len(places))]}, Vector: queryVector(text)}
	return Record{Seq: h.seq, Revision: m.last}
}

// copied is a copy of m's latest revision (a conflict mark, a pin): the same text, a
// new version and status, no vector; now and then with its tags changed.
func (h *history) copied(m *histMem) Record {
	h.seq++
	m.version++
	c := *m.last
	c.Seq, c.Version, c.Vector, c.Status = h.seq, m.version, nil, "conflicted"
	if m.last.Status == "conflicted" {
		c.Status = "active"
	}
	if h.rng.Intn(4) == 0 {
		c.Tags = []string{places[h.rng.Intn(len(places))]}
	}
	m.last = &c
	return Record{Seq: h.seq, Revision: m.last}
}

func (h *history) fresh() Record {
	r := h.rng
	// Keys share words with the sentences, and some repeat a word.
	key := fmt.Sprintf("%s.%s.%d", people[r.Intn(len(people))], places[r.Intn(len(places))], len(h.mems))
	if r.Intn(5) == 0 {
		w := people[r.Intn(len(people))]
		key = w + "-" + w + "-" + fmt.Sprint(len(h.mems))
	}
	m := &histMem{id: uuid.NewString(), key: key, user: fmt.Sprintf("u%d", r.Intn(4))}
	h.mems, h.keys = append(h.mems, m), append(h.keys, key)
	return h.revision(m)
}

func (h *history) grow(x *Index, n int) {
	var batch []Record
	for range n {
		batch = append(batch, h.fresh())
		if len(batch) == 25 {
			x.Apply(ns, batch)
			batch = nil
		}
	}
	x.Apply(ns, batch)
}

func (h *history) churn(x *Index, n int) {
	for range n {
		r := h.rng
		var rec Record
		m, p := h.mems[r.Intn(len(h.mems))], r.Intn(100)
		switch {
		case p < 40 && !m.gone:
			rec = h.revision(m)
		case p < 55 && !m.gone:
			rec = h.copied(m)
		case p < 65 && !m.gone:
			h.seq++
			rec = Record{Seq: h.seq, Redaction: &Redaction{MemoryID: m.id, Versions: []int64{m.version}}}
		case p < 67:
			h.seq++
			user := fmt.Sprintf("u%d", r.Intn(4))
			rec = Record{Seq: h.seq, Erasure: &Fence{UserID: user, Seq: h.seq}, Jump: true}
			for _, m := range h.mems {
				if m.user == user {
					m.gone = true
				}
			}
		default:
			rec = h.fresh()
		}
		x.Apply(ns, []Record{rec})
	}
}

func checkLegs(t *testing.T, x *Index, h *history, when string) {
	t.Helper()
	s := x.spaces[ns]
	s.mu.RLock()
	defer s.mu.RUnlock()
	for term, l := range s.post {
		if !slices.IsSortedFunc(l.slice(), postingOrder) {
			t.Fatalf("%s: the list of term %d is out of slot order", when, term)
		}
	}
	for term, list := range s.keyPost {
		if !slices.IsSortedFunc(list, postingOrder) {
			t.Fatalf("%s: the key list of term %d is out of slot order", when, term)
		}
	}
	rng := rand.New(rand.NewSource(99))
	filters := []Filter{served(), {Statuses: []string{"active"}, Now: now, UserID: "u1"}, {Statuses: []string{"active"}, Now: now, Tags: []string{"oslo"}}}
	for q := range 40 {
		text := sentence(rng)
		if q%4 == 0 {
			text = h.keys[rng.Intn(len(h.keys))]
		}
		if q%8 == 1 { // past maxHeld terms: the lexical leg's coverage reads the lists
			for range 12 {
				text += " " + sentence(rng)
			}
		}
		ts := terms(text)
		f := filters[q%len(filters)]
		m := s.compile(f)
		e := s.eligibleCached(&m)
		if e.count == 0 {
			continue
		}
		for _, limit := range []int{1 << 20, 7} {
			got, gotCov := s.lexical(ts, limit, 1.2, 0.75, e)
			want, wantCov := lexicalByTerm(s, ts, limit, 1.2, 0.75, e)
			sameHits(t, fmt.Sprintf("%s: lexical %q limit %d", when, text, limit), got, want, limit)
			if limit > len(want) {
				for _, sc := range want {
					if math.Abs(gotCov[sc.slot]-wantCov[sc.slot]) > 1e-12 {
						t.Fatalf("%s: lexical %q: coverage of slot %d %v, want %v", when, text, sc.slot, gotCov[sc.slot], wantCov[sc.slot])
					}
				}
			}
			sameHits(t, fmt.Sprintf("%s: keys %q limit %d", when, text, limit), s.keys(text, ts, limit, e), keysByTerm(s, text, ts, limit, e), limit)
		}
	}
}

// sameHits compares two legs' answers: the same scores in the same order, and the
// same documents wherever a score is not tied with the last one kept (which of the
// tied documents a leg keeps depends on the order it met them).
func sameHits(t *testing.T, what string, got, want []scored, limit int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i].score != want[i].score {
			t.Fatalf("%s: hit %d scores %v, want %v", what, i, got[i].score, want[i].score)
		}
		if len(want) == limit && want[i].score == want[len(want)-1].score {
			continue
		}
		if got[i].slot != want[i].slot {
			t.Fatalf("%s: hit %d is slot %d, want %d", what, i, got[i].slot, want[i].slot)
		}
	}
}

// lexicalByTerm is the lexical leg scored term by term over every posting, into a map:
// the reference the leg's walk must match.
func lexicalByTerm(s *space, terms []string, limit int, k1, b float64, e *eligible) ([]scored, map[uint32]float64) {
	n := float64(e.n)
	avgdl := math.Max(e.sumDL/n, 1)
	lists := make([][]posting, len(terms))
	idfs := make([]float64, len(terms))
	total := 0.0
	for i, t := range terms {
		if id, ok := s.lexicon.lookup(t); ok && int(id) < len(s.post) {
			lists[i] = s.post[id].slice()
		}
		df := 0.0
		for _, p := range lists[i] {
			if e.has(p.slot) && s.current(p) {
				df++
			}
		}
		idfs[i] = math.Log(1 + (n-df+0.5)/(df+0.5))
		total += idfs[i]
	}
	score, cov := map[uint32]float64{}, map[uint32]float64{}
	var order []uint32
	for i, list := range lists {
		for _, p := range list {
			if !e.has(p.slot) || !s.current(p) {
				continue
			}
			if _, ok := score[p.slot]; !ok {
				order = append(order, p.slot)
			}
			tf, dl := float64(p.tf), float64(s.cards[p.slot].docLen)
			score[p.slot] += idfs[i] * tf * (k1 + 1) / (tf + k1*(1-b+b*dl/avgdl))
			cov[p.slot] += idfs[i] / total
		}
	}
	top := newBest(limit)
	for _, slot := range order {
		top.offer(scored{slot: slot, score: score[slot]})
	}
	return top.list(s), cov
}

// keysByTerm is the key leg read from each document's own key terms.
func keysByTerm(s *space, text string, terms []string, limit int, e *eligible) []scored {
	verbatim := strings.TrimSpace(text)
	if len(terms) == 0 {
		terms = []string{verbatim}
	}
	var want []uint32
	for _, t := range terms {
		if id, ok := s.lexicon.lookup(t); ok {
			want = append(want, id)
		}
	}
	seen := map[uint32]bool{}
	top := newBest(limit)
	consider := func(slot uint32) {
		if !e.has(slot) || seen[slot] {
			return
		}
		seen[slot] = true
		d := &s.docs[slot]
		score := 1.0
		if d.key != verbatim {
			held := 0
			for _, t := range d.keyTerms() {
				if slices.Contains(want, t) {
					held++
				}
			}
			score = float64(held) / float64(max(len(d.keyTerms()), 1))
		}
		top.offer(scored{slot: slot, score: score})
	}
	if head, ok := s.byKey.head(s.docs, verbatim); ok {
		for slot := head; slot >= 0; slot = s.docs[slot].next {
			consider(uint32(slot))
		}
	}
	for _, id := range want {
		if list, ok := s.keyPost[id]; ok {
			for _, p := range list {
				if s.current(p) {
					consider(p.slot)
				}
			}
		}
	}
	return top.list(s)
}

// Hits of equal score are ranked by identity, whatever order they were written in;
// a better score comes first.
func TestTiedHitsRankByIdentity(t *testing.T) {
	x := New(Config{})
	keys := []string{"m", "c", "x", "a", "q", "f"}
	for i, k := range keys {
		r := rev(int64(i+1), k, "tea in the morning", int64(i+1))
		r.MemoryID = uuid.NewString()
		apply(x, revRec(r))
	}
	best := rev(7, "z", "tea tea in the morning", 7)
	best.MemoryID = uuid.NewString()
	apply(x, revRec(best))
	got := keysOf(search(t, x, served(), "tea morning").Lexical)
	if want := "[z a c f m q x]"; fmt.Sprint(got) != want {
		t.Fatalf("lexical hits %v, want %s", got, want)
	}
}
