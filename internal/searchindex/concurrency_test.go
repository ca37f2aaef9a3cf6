package searchindex

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Searches, peer reads and waits run while a writer applies and graphs build behind it
// (run with -race); every search sees a consistent namespace: each hit's key is one the
// writer applied.
func TestSearchesRunWhileTheIndexApplies(t *testing.T) {
	revs := corpus(6000, 11)
	x := New(Config{GraphMin: 1500, GraphEfConstruction: 32})
	defer x.Close()
	keys := map[string]bool{}
	for _, r := range revs {
		keys[r.MemoryKey] = true
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := revs[(i*7+w)%len(revs)]
				legs, _, err := x.Search(ns, Query{Filter: served(), Vector: r.Vector, Text: r.MemoryKey, Terms: terms(r.Text), Limit: 20, K1: 1.2, B: 0.75})
				if err != nil {
					t.Error(err)
					return
				}
				for _, h := range append(append(legs.Vector, legs.Lexical...), legs.Key...) {
					if !keys[h.MemoryKey] {
						t.Errorf("a hit of a key never written: %q", h.MemoryKey)
						return
					}
				}
				x.Peers(ns, PeerQuery{MemoryType: "fact", MemoryKey: r.MemoryKey, Vector: r.Vector, Limit: 16, Now: now})
			}
		}(w)
	}
	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		waited <- x.WaitFor(ctx, ns, int64(len(revs)))
	}()
	for i := 0; i < len(revs); i += 200 {
		x.Apply(ns, records(revs[i:min(i+200, len(revs))]))
	}
	// Rewrite a third of them: old rows die, the graph's tail grows, the arena compacts.
	for i := 0; i < len(revs)/3; i++ {
		r := *revs[i]
		r.Seq, r.Version, r.Vector = int64(len(revs)+i+1), r.Version+1<<32, revs[len(revs)-1-i].Vector
		x.Apply(ns, []Record{{Seq: r.Seq, Revision: &r}})
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	x.Settle()
	if st := x.Stats(); st.Entries != int64(len(revs)) || st.Vectors != int64(len(revs)) {
		t.Fatalf("stats %+v", st)
	}
}
