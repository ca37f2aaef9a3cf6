package searchindex

import (
	"fmt"
	"math/rand"
	"testing"
)

// TestKeyTableAgreesWithAMap pushes and deletes keys at random, many colliding in a small
// table, and checks every lookup against a map: a deletion must not hide a key that
// probed past it.
func TestKeyTableAgreesWithAMap(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	docs := make([]doc, 3000)
	for i := range docs {
		docs[i].key = fmt.Sprintf("k%d", i)
	}
	tab, model := newKeyTable(), map[string]int32{}
	for step := 0; step < 50_000; step++ {
		slot := int32(rng.Intn(len(docs)))
		key := docs[slot].key
		if rng.Intn(3) == 0 {
			tab.delete(docs, key)
			delete(model, key)
		} else {
			prev, had := model[key]
			if !had {
				prev = -1
			}
			if got := tab.push(docs, slot); got != prev {
				t.Fatalf("step %d: push of %s answered %d as the slot before, want %d", step, key, got, prev)
			}
			model[key] = slot
		}
		if step%997 == 0 || step > 49_000 {
			for _, d := range docs {
				got, ok := tab.head(docs, d.key)
				want, wantOK := model[d.key]
				if ok != wantOK || (ok && got != want) {
					t.Fatalf("step %d: key %s: got %d %v, want %d %v", step, d.key, got, ok, want, wantOK)
				}
			}
			if tab.len() != len(model) {
				t.Fatalf("step %d: %d keys, want %d", step, tab.len(), len(model))
			}
		}
	}
}
