package bench

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// Every fact of the peers corpus names its own person, and its question names the
// same person and no other fact's: a top hit other than the fact is a miss of the
// system searched, not of the corpus.
func TestPeerCorpusAsksEachFactByItsOwnPerson(t *testing.T) {
	c := newPeerCorpus(20_000, rand.New(rand.NewPCG(1, 2)))
	people := map[string]int{}
	for i, fact := range c.facts {
		person := peerPerson(i)
		if !strings.HasPrefix(fact, person+" ") {
			t.Fatalf("fact %d %q does not start with its person %q", i, fact, person)
		}
		if j, seen := people[person]; seen {
			t.Fatalf("facts %d and %d name the same person %q", j, i, person)
		}
		people[person] = i
		q := c.query(i)
		if q == person || !strings.Contains(q, person) {
			t.Fatalf("fact %d %q: question %q", i, fact, q)
		}
	}
}
